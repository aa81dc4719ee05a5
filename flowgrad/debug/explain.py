"""Why is a gradient missing, or zero? ``tf.debug.explain_gradient(f, *args)`` replays f,
recording where each op was called, and tells for each input whether it reaches the output
and, if not, where the path broke: a stop_gradient, an op with zero gradient (floor, round,
a comparison...), an integer index, a tensor computed before f was called, a variable that
is not trainable, a tensor disposed inside f.
"""
import numpy as np

from .. import engine as E
from .. import tape
from ..errors import DisposedError, FlowgradError
from ..ops import OPS
from ..tensor import Tensor, Variable, _VARIABLES, convert
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
        labels = ["x"] if len(xs) == 1 else [f"args[{i}]" for i in range(len(xs))]
    else:
        xs = list(_VARIABLES.values())
        labels = [f"variable '{v.name}'" for v in xs]
    out = []

    def run():
        sites.want_sites(True)
        level = E.recording_level()
        try:
            sess, owner = E.begin_recording()
            first_id = next(E._ids)          # tensors with smaller ids existed before f ran
            try:
                y = f(*xs) if args else f()
            except DisposedError as e:
                return [InputExplanation(lab, "missing", [
                    f"f used a tensor disposed inside f (by dispose() or a tidy): {e}"])
                    for lab in labels], []
            finally:
                E.end_recording()
            if not isinstance(y, Tensor):
                return [InputExplanation(lab, "missing", [
                    f"f returned {type(y).__name__}, not a tensor"]) for lab in labels], []
            return _explain(y, xs, labels, sess), _leaf_notes(y, xs, sess, first_id)
        finally:
            sites.want_sites(False)
            E.unwind_recording(level)
    result, notes = E.tidy(run)
    out.extend(result)
    return Explanation(out, notes)


def _explain(y, xs, labels, sess):
    nodes = [n for n in sess.nodes if n.pos <= (y._node.pos if y._node is not None and
                                                y._node.sess is sess else -1)]
    ancestors = _ancestors(y, sess)
    grads, connected = tape.backprop(
        y, OPS["fill"](y.shape, 1, "float64" if y.dtype == "float64" else "float32"), xs,
        sess)
    result = []
    for x, label, g, c in zip(xs, labels, grads, connected):
        dep = _dependents(x, nodes, sess)
        if isinstance(x, Variable) and not x.trainable:
            pre = [f"{label} is not trainable (trainable=False): variable_grads and minimize "
                   f"skip it"]
        else:
            pre = []
        if id(x) == id(y):
            result.append(InputExplanation(label, "flows", pre + ["f returns it unchanged"],
                                           1.0))
            continue
        if g is not None and float(np.abs(g.numpy()).max()) > 0:
            result.append(InputExplanation(label, "flows", pre, float(
                np.sqrt((g.numpy().astype(np.float64) ** 2).sum()))))
            continue
        reasons = pre + _blockers(x, dep, ancestors, sess)
        if not dep:
            reasons.append(f"{label} is not used by any op inside f: f must compute its result "
                           f"from {label} inside f (a tensor computed from it before f was "
                           f"called is a constant there)")
        elif not (dep & ancestors):
            used = [n for n in nodes if id(n) in {id(d) for d in dep}][:3]
            reasons.append(f"{label} is used inside f, but no result computed from it reaches "
                           f"the output (used by " + ", ".join(
                               f"{sites.op_name(n)}{_where(n)}" for n in used) + ")")
        status = "zero" if c else "missing"
        if status == "zero" and len(reasons) == len(pre):
            reasons.append("every rule on the path gives 0 at this point (e.g. relu of a "
                           "negative input, or a multiplication by 0)")
        result.append(InputExplanation(label, status, reasons))
    return result


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
                                   f"{tape._input_name(prim, i)}, an {t.dtype} input{made}, "
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
