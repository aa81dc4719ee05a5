"""Why is a gradient missing, or zero? ``tf.debug.explain_gradient(f, *args)`` replays f,
recording where each op was called and where values were read out, and tells for each input
whether it reaches the output and, if not, where the path broke, naming the op by its public
name and the user's file:line:

- cut: values read out (``data_sync``, ``numpy``, ``item``, ``np.asarray``...) and made into
  a new tensor; ``stop_gradient``; an int/bool cast; a piecewise-constant op (floor, round,
  a comparison...); a tensor computed before f was called; a variable with
  ``trainable=False``; a tensor disposed inside f;
- zeroed: the op whose rule turned a non-zero gradient into zeros here (a dead relu, a
  saturated sigmoid/tanh, a ``where`` branch that is never taken, a multiplication by 0, a
  clip that clips everything...).
"""
import threading

import numpy as np

from .. import engine as E
from .. import recording
from .. import scopes
from .. import interceptors
from .. import tape
from ..arg_checks import check_arity
from ..errors import ArgumentError, DisposedError, FlowgradError
from ..ops import OPS
from ..tensor import Tensor, Variable, all_variables, convert
from ..thread_state import next_id
from .. import user_frames
from . import sites


class InputExplanation:
    """For one input: ``status`` is 'flows', 'zero' or 'missing'; ``reasons`` say why."""

    def __init__(self, label, status, reasons, norm=None):
        self.label, self.status, self.reasons, self.norm = label, status, reasons, norm

    def __str__(self):
        head = {"flows": f"gradient flows (norm {self.norm or 0:.6g})",
                "zero": "gradient is zero",
                "missing": "no gradient: not connected to f's output"}[self.status]
        return "\n".join([f"{self.label}: {head}"] + [f"    - {r}" for r in self.reasons])


class Explanation:
    """explain_gradient's answer: one InputExplanation per input (``.inputs``)."""

    def __init__(self, inputs, notes=()):
        self.inputs, self.notes = inputs, list(notes)

    def __getitem__(self, i):
        if not isinstance(i, (int, np.integer, slice)) or isinstance(i, bool):
            raise ArgumentError(f"Explanation[i]: i must be the index of an input (an int), "
                                f"got {type(i).__name__}")
        return self.inputs[i]

    def __str__(self):
        return "\n".join([str(i) for i in self.inputs] + list(self.notes))

    __repr__ = __str__


def _where(node):
    site = sites.node_site(node)
    return f" at {site}" if site is not None else ""


def explain_gradient(f, *args):
    """Explain, for each argument of f (or each registered variable when f takes none),
    whether and why its gradient is missing or zero.

    >>> import flowgrad as tf
    >>> print(tf.debug.explain_gradient(lambda x: tf.stop_gradient(x) * 2, tf.scalar(1.0)))
    ... # doctest: +ELLIPSIS
    x: no gradient: not connected to f's output
        - the path is cut by stop_gradient at ...
    """
    if not callable(f):
        raise FlowgradError("explain_gradient(f, *args): f must be a function")
    if args:
        xs = [convert(a, f"args[{i}]", "explain_gradient") for i, a in enumerate(args)]
        for i, x in enumerate(xs):
            if x.is_disposed:
                raise DisposedError(f"explain_gradient(f, *args): args[{i}]: Tensor is "
                                    f"disposed.")
        check_arity(f, len(xs), "explain_gradient(f, *args)")
        labels = ["x"] if len(xs) == 1 else [f"args[{i}]" for i in range(len(xs))]
    else:
        xs = all_variables()
        labels = [f"variable '{v.name}'" for v in xs]
    out = []

    def run():
        sites.want_sites(True)
        level = recording.recording_level()
        watcher = _ReadWatcher()
        w = None
        try:
            w = interceptors.watch("explain", owner=watcher, read=watcher.on_read)
            sess, owner = recording.begin_recording()
            first_id = next_id()             # tensors with smaller ids existed before f ran
            try:
                y = f(*xs) if args else f()
            except DisposedError as e:
                return [InputExplanation(lab, "missing", [
                    f"f used a tensor disposed inside f (by dispose() or a tidy): {e}"])
                    for lab in labels], []
            except FlowgradError as e:      # e.g. a NumPy function with no flowgrad op
                where = _raised_at(e)
                return [InputExplanation(lab, "missing", [
                    f"f stopped with an error{where}: {e}"]) for lab in labels], []
            finally:
                interceptors.unwatch(w)
                recording.end_recording()
            if not isinstance(y, Tensor):
                return [InputExplanation(lab, "missing", [
                    f"f returned {type(y).__name__}, not a tensor"]) for lab in labels], []
            return (_explain(y, xs, labels, sess, watcher.reads),
                    _leaf_notes(y, xs, sess, first_id))
        finally:
            if w is not None:
                interceptors.unwatch(w)
            sites.want_sites(False)
            recording.unwind_recording(level)
    result, notes = scopes.tidy(run)
    out.extend(result)
    return Explanation(out, notes)


# how a read shows in the stack (the outermost flowgrad frame) -> what the user wrote
_READS = {"__array__": "np.asarray / np.array", "__float__": "float()", "__int__": "int()",
          "__bool__": "bool()", "__index__": "operator.index", "__format__": "format()",
          "__array_function__": "a NumPy function", "__array_ufunc__": "a NumPy ufunc",
          "__iter__": "iteration", "__len__": "len()", "__str__": "str()",
          "__repr__": "repr()", "to_string": "to_string()", "print": "tf.print"}


class _ReadWatcher:
    """Watches tensor reads while f runs (interceptors.watch: Tensor._array calls it): records
    where tensor values were read out. (A jitted function runs eagerly meanwhile.)"""

    def __init__(self):
        self.thread = threading.get_ident()
        self.reads = []                     # (tensor, Site)

    def on_read(self, t):
        if threading.get_ident() == self.thread:
            site = user_frames.capture(2)
            if site is not None and site.op not in OPS:     # (an op checking its inputs)
                self.reads.append((t, site))


def _read_reasons(label, x, dep, reads):
    out, seen = [], set()
    for t, site in reads:
        if not (t is x or (t._node is not None and t._node in dep)) or site is None:
            continue
        how = _READS.get(site.op, f"{site.op}()")
        what = label if t is x else f"a tensor computed from {label}"
        key = (how, site.filename, site.lineno)
        if key in seen:
            continue
        seen.add(key)
        out.append(f"the values of {what} were read out by {how} at {site}: a tensor made "
                   f"from read-out values is a constant, the gradient cannot flow back "
                   f"through it; compute with flowgrad ops on {label} instead")
    return out


def _explain(y, xs, labels, sess, reads=()):
    ancestors = _ancestors(y, sess)
    flow = {}                       # node -> [output cotangent non-zero, {input: dx non-zero}]
    me = threading.get_ident()

    def watch(n, i, t, dx, dy):
        if threading.get_ident() == me:     # (another thread's backward pass is not ours)
            r = flow.get(n)
            if r is None:
                r = flow[n] = [_nonzero(dy), {}]
            r[1][i] = r[1].get(i, False) or _nonzero(dx)
        return dx
    w = interceptors.watch("explain", dx=watch)
    try:
        grads, connected = tape.backprop(
            y, OPS["fill"](y.shape, 1, "float64" if y.dtype == "float64" else "float32"), xs,
            sess)
    finally:
        interceptors.unwatch(w)
    result = []
    for x, label, g, c in zip(xs, labels, grads, connected):
        dep = _dependents(x, sess.nodes, sess)
        if isinstance(x, Variable) and not x.trainable:
            pre = [f"{label} is not trainable (trainable=False): variable_grads and minimize "
                   f"skip it"]
        else:
            pre = []
        if id(x) == id(y):
            result.append(InputExplanation(label, "flows", pre + ["f returns it unchanged"],
                                           1.0))
            continue
        if g is not None and float(np.abs(g.numpy()).max(initial=0)) > 0:
            result.append(InputExplanation(label, "flows", pre, float(
                np.sqrt((g.numpy().astype(np.float64) ** 2).sum()))))
            continue
        reasons = pre + _read_reasons(label, x, dep, reads) + \
            _blockers(x, dep, ancestors, sess)
        if not dep:
            if len(reasons) == len(pre):
                reasons.append(f"{label} is not used by any op inside f: f must compute its "
                               f"result from {label} inside f (a tensor computed from it "
                               f"before f was called is a constant there)")
        elif not (dep & ancestors):
            used = sorted(dep, key=lambda n: n.pos)[:3]
            reasons.append(f"{label} is used inside f, but no result computed from it reaches "
                           f"the output (used by " + ", ".join(
                               f"{sites.op_name(n)}{_where(n)}" for n in used) + ")")
        status = "zero" if c else "missing"
        if status == "zero":          # the ops that zeroed a live gradient come first
            reasons[len(pre):len(pre)] = _zeroing(x, dep & ancestors, flow)
        if status == "zero" and len(reasons) == len(pre):
            reasons.append("every rule on the path gives 0 at this point")
        result.append(InputExplanation(label, status, reasons))
    return result


def _raised_at(e):
    """ at file:line of the user's frame where ``e`` was raised ('' if none)."""
    tb, last = e.__traceback__, None
    while tb is not None:
        if not user_frames.internal(tb.tb_frame.f_code.co_filename):
            last = tb
        tb = tb.tb_next
    if last is None:
        return ""
    import linecache
    fn, ln = last.tb_frame.f_code.co_filename, last.tb_lineno
    return f" at {fn}:{ln}: {linecache.getline(fn, ln).strip()}"


def _nonzero(t):
    if isinstance(t, (list, tuple)):
        return any(_nonzero(u) for u in t if u is not None)
    return t is not None and bool(np.any(np.asarray(E.to_host(t._data)) != 0))


def _values(t):
    return np.asarray(E.to_host(t._data))


def _zeroing(x, path, flow):
    """The ops on x's path that got a non-zero gradient and passed zeros on toward x."""
    out = []
    for n in sorted(path, key=lambda n: -n.pos):
        r = flow.get(n)
        if r is None or not r[0]:
            continue
        dep_inputs = [i for i, t in enumerate(n.inputs)
                      if t is x or (t._node is not None and t._node in path)]
        if dep_inputs and not any(r[1].get(i, False) for i in dep_inputs):
            out.append(_why_zero(n, dep_inputs))
    return out


def _why_zero(n, dep_inputs):
    name, where, prim = sites.op_name(n), _where(n), n.prim.name
    ins = n.inputs
    first = _values(ins[0]) if ins else None
    if prim in ("Relu", "Relu6"):
        return (f"{name}{where} is dead here: all {first.size} of its inputs are <= 0 "
                f"(max {first.max():.4g}), where its derivative is 0")
    if prim in ("Sigmoid", "Tanh"):
        return (f"{name}{where} is saturated: its inputs have |x| >= "
                f"{np.abs(first).min():.4g}, where its derivative underflows to 0 in "
                f"{ins[0].dtype}")
    if prim == "Select" and len(ins) == 3:
        cond = _values(ins[0]).astype(bool)
        branch = "a (taken where the condition is true)" if 1 in dep_inputs else \
            "b (taken where the condition is false)"
        state = "false" if 1 in dep_inputs else "true"
        return (f"{name}{where} never takes branch {branch}: its condition is {state} "
                f"everywhere ({int(cond.sum())} of {cond.size} true)")
    if prim == "Multiply" and len(ins) == 2:
        other = ins[1 - dep_inputs[0]] if len(dep_inputs) == 1 else None
        if other is not None and not np.any(_values(other)):
            return f"{name}{where} multiplies it by 0 everywhere"
    if prim == "ClipByValue":
        return f"{name}{where} clips every one of its inputs: outside the range, the " \
               f"derivative is 0"
    if prim in ("Maximum", "Minimum") and len(dep_inputs) == 1:
        return f"{name}{where}: the other argument is chosen everywhere, so this one " \
               f"gets no gradient"
    what = ", ".join(tape.input_name(n.prim, i) for i in dep_inputs)
    return f"{name}{where} gives a zero gradient to its input {what} at these values"


def _ancestors(y, sess):
    yn = y._node
    if yn is None or yn.sess is not sess:
        return set()
    live, stack = set(), [yn]
    while stack:
        n = stack.pop()
        if n in live:
            continue
        live.add(n)
        for t in n.inputs:
            m = t._node
            if m is not None and m.sess is sess and m not in live:
                stack.append(m)
    return live


def _dependents(x, nodes, sess):
    dep = set()
    for n in nodes:
        for t in n.inputs:
            if t is x or (t._node is not None and t._node in dep):
                dep.add(n)
                break
    return dep


def _blockers(x, dep, ancestors, sess):
    """Nodes on x -> y paths that pass no gradient to their x-dependent input."""
    reasons = []
    for n in sorted(dep & ancestors, key=lambda n: n.pos):
        prim = n.prim
        dep_inputs = [i for i, t in enumerate(n.inputs)
                      if t is x or (t._node is not None and t._node in dep)]
        if prim.cut:
            reasons.append(f"the path is cut by stop_gradient{_where(n)}")
        elif prim.vjp is None:
            reasons.append(f"{sites.op_name(n)} has a zero gradient (it is piecewise "
                           f"constant){_where(n)}")
        else:
            for i in dep_inputs:
                t = n.inputs[i]
                if t.dtype in ("int32", "bool"):
                    src = t._node
                    made = ""
                    if src is not None and src.prim.name == "Cast":
                        made = f" (cast to {t.dtype}{_where(src)})"
                    reasons.append(f"it reaches {sites.op_name(n)}{_where(n)} as "
                                   f"{tape.input_name(prim, i)}, {'an' if t.dtype == 'int32' else 'a'} "
                                   f"{t.dtype} input{made}, "
                                   f"which gets no gradient")
    return reasons


def _leaf_notes(y, xs, sess, first_id):
    """Tensors f used that were created before it ran (constants inside f)."""
    ids = {id(x) for x in xs}
    leaves = {}
    for n in _ancestors(y, sess):
        for t in n.inputs:
            if id(t) not in ids and t.id < first_id and t.kept != 2 and \
                    t.dtype in ("float32", "float64") and not isinstance(t, Variable):
                leaves[id(t)] = (t, n)
    if not leaves:
        return []
    described = ", ".join(f"a {t.dtype} tensor of shape {t.shape} used by "
                          f"{sites.op_name(n)}{_where(n)}" for t, n in list(leaves.values())[:4])
    return [f"note: f also uses tensors created before it was called ({described}); if one "
            f"was computed from an input, compute it inside f so that the gradient sees it"]
