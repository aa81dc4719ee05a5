"""Where the user called each recorded op, for the debug features: they switch on the
instrumented kernel entry below, which records the user's site on every node (the site
itself, the first stack frame outside flowgrad, is found by flowgrad/user_frames.py) and
runs the kernel checkers. Only debug features walk the stack; plain runs never do."""
from .. import recording
from .. import interceptors
from ..user_frames import capture


def node_site(node):
    return getattr(node, "site", None)


def op_name(node):
    """The public name of the op that recorded ``node`` (its kernel name if unknown)."""
    attrs = node.attrs or {}
    if node.prim.strict and attrs.get("name"):
        # a custom_grad op is its forward function, wherever it was called from (even
        # from inside flowgrad, as check_custom_grad does)
        return attrs["name"]
    site = node_site(node)
    if site is not None and site.op not in ("?", "run_kernel", "run"):
        return site.op
    return attrs.get("name") or node.prim.name


# ---------------------------------------------------------------- the instrumented entry

_plain = interceptors.ENGINE_RUN       # what lies below the debug layer (interceptors: _link)
_sites = 0              # > 0 while some feature wants sites recorded on nodes


def _instrumented(prim, inputs, attrs=None):
    out = _plain(prim, inputs, attrs)
    if _sites and inputs and recording.is_recording():
        first = out[0] if isinstance(out, tuple) else out
        n = first._node
        if n is not None and getattr(n, "site", None) is None:
            n.site = capture(1)
    for check in interceptors.CHECKERS:
        check(prim, inputs, attrs, out)
    return out


def _on_record(node):
    if getattr(node, "site", None) is None:
        node.site = capture(1)


def _link(run, make):
    global _plain
    _plain = run


def _install():
    # (the layers over the kernel entry are composed in one place: flowgrad/interceptors.py)
    interceptors.set_layer("debug", _instrumented if (_sites or interceptors.CHECKERS) else None,
                    link=_link, record=_on_record if _sites else None)


def want_sites(on):
    """Record user sites on nodes while ``on`` (nestable)."""
    global _sites
    _sites += 1 if on else -1
    _install()


def add_checker(fn):
    """Run ``fn(prim, inputs, attrs, out)`` after every kernel (batched ones too) until
    ``remove_checker(fn)``."""
    interceptors.CHECKERS.append(fn)
    _install()


def remove_checker(fn):
    if fn in interceptors.CHECKERS:
        interceptors.CHECKERS.remove(fn)
    _install()
