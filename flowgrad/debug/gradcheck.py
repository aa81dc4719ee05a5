"""Gradient checks against finite differences — and which op's gradient rule is wrong.

``check_grads`` re-runs f on float64 copies of its inputs, compares the analytic derivatives
(reverse and/or forward mode, to any order) with central differences element by element
(random projections above a size limit), picks the step size by a small sweep, at kinks
(one-sided differences that disagree) accepts a value between the two one-sided slopes and
nothing else, and on failure replays f's recorded
graph to check every node's rule locally against differences of that node's forward,
naming the op and the user's line that created it.
"""
import numpy as np

from .. import engine as E
from .. import recording
from .. import scopes
from .. import tape
from ..arg_checks import as_int, as_number, check_arity, describe, flag
from ..errors import ArgumentError, FlowgradError, GradientError
from ..jacobians import jacobian, jvp, vjp
from ..ops import OPS
from ..tensor import Tensor
from . import sites

STEPS = (1e-3, 1e-4, 1e-5, 1e-6, 1e-7)
_tensor = OPS["tensor"]


class GradCheckError(FlowgradError, AssertionError):
    """check_grads found a gradient that disagrees with finite differences (``.report``)."""

    def __init__(self, report):
        super().__init__(str(report))
        self.report = report


class InputCheck:
    """The comparison for one differentiated input at one order and mode.

    At a kink (the one-sided differences disagree, as for abs or relu at 0) no single
    number is the derivative: there the analytic value must lie between the two one-sided
    slopes (any subgradient passes, 1000 for relu at 0 fails)."""

    def __init__(self, index, shape, analytic, numeric, kinks, rtol, atol, where,
                 sides=None):
        self.index, self.shape = index, tuple(shape)
        err = np.abs(analytic - numeric)
        scale = np.maximum(np.abs(analytic), np.abs(numeric))
        bad = err > atol + rtol * scale
        lead = err.ndim - len(self.shape)          # (the output's axes come first)
        smooth = np.ones(err.shape, bool)
        for k in kinks:
            smooth[(slice(None),) * lead + tuple(k)] = False
        if kinks:
            lo, hi = (np.minimum(*sides), np.maximum(*sides)) if sides is not None else \
                (numeric, numeric)
            # (the slopes of one step size: a tenth of their gap more, for the curvature)
            slack = atol + rtol * np.maximum(np.abs(lo), np.abs(hi)) + 0.1 * (hi - lo)
            outside = (analytic < lo - slack) | (analytic > hi + slack)
            bad = np.where(smooth, bad, outside)
            err = np.where(smooth, err, np.where(outside, np.maximum(lo - analytic,
                                                                      analytic - hi), 0.0))
        self.kinks = kinks
        rel = err / np.where(scale > 0, scale, 1)
        self.max_abs = float(err[smooth].max()) if smooth.any() else 0.0
        self.max_rel = float(rel[smooth].max()) if smooth.any() else 0.0
        pick = np.where(bad, err, -1) if bad.any() else np.where(smooth, err, -1)
        w = tuple(int(i) for i in np.unravel_index(int(np.argmax(pick)), err.shape)) \
            if err.size else ()
        self.worst = where(w)
        self.analytic = float(analytic[w]) if err.size else 0.0
        self.numeric = float(numeric[w]) if err.size else 0.0
        self.at_kink = bool(err.size and not smooth[w])
        self.slopes = (float(lo[w]), float(hi[w])) if self.at_kink else None
        self.failures = int(bad.sum())
        self.ok = self.failures == 0

    def __str__(self):
        status = "ok" if self.ok else f"FAILED ({self.failures} element(s))"
        s = (f"input {self.index} {self.shape}: {status}; max abs error {self.max_abs:.3g}, "
             f"max rel error {self.max_rel:.3g}"
             f"{' (away from kinks)' if self.kinks else ''}; worst at {self.worst}: ")
        if self.at_kink:
            s += (f"analytic {self.analytic:.10g}, not between the one-sided slopes "
                  f"{self.slopes[0]:.10g} and {self.slopes[1]:.10g} (a kink)")
        else:
            s += f"analytic {self.analytic:.10g} vs numeric {self.numeric:.10g}"
        if self.kinks:
            s += (f"; kinks (one-sided differences disagree: the analytic value must lie "
                  f"between them) at {[tuple(int(i) for i in k) for k in self.kinks[:5]]}")
        return s


class _Broken:
    """A derivative that could not be computed at all."""
    ok = False

    def __init__(self, error):
        self.error = error

    def __str__(self):
        return f"the gradient could not be computed: {self.error}"


class Culprit:
    """A node whose gradient rule disagrees with differences of its own forward.

    The op is checked alone, at the values it saw: its outputs weighted by a random
    cotangent (uniform in [0.5, 1.5], so no output is left out), the rule's gradient for
    each element of input ``wrt`` against central differences of the op's forward.
    ``index`` is the worst element, ``analytic``/``numeric`` its two values, ``max_abs`` and
    ``max_rel`` the largest errors, ``wrong`` of ``size`` elements beyond tolerance."""

    def __init__(self, op, kernel, site, wrt, analytic, numeric, err, note="", index=None,
                 max_rel=float("nan"), wrong=0, size=0):
        self.op, self.kernel, self.site, self.wrt = op, kernel, site, wrt
        self.analytic, self.numeric, self.max_abs, self.note = analytic, numeric, err, note
        self.index, self.max_rel, self.wrong, self.size = index, max_rel, wrong, size

    def __str__(self):
        where = f", created at {self.site}" if self.site is not None else ""
        head = f"the gradient rule of {self.op} (kernel {self.kernel}){where}"
        if self.index is None:
            s = (f"{head}: with respect to {self.wrt} it gives {self.analytic:.10g} where "
                 f"differences of its forward give {self.numeric:.10g} (max abs error "
                 f"{self.max_abs:.3g})")
        else:
            s = (f"{head}: {self.wrong} of {self.size} elements of the gradient with respect "
                 f"to {self.wrt} are wrong (max abs error {self.max_abs:.3g}, max rel error "
                 f"{self.max_rel:.3g}); worst at element {self.index}: the rule gives "
                 f"{self.analytic:.10g}, central differences of the op's forward give "
                 f"{self.numeric:.10g} (the op alone at the values it saw, its output "
                 f"weighted by a random cotangent in [0.5, 1.5])")
        return s + (f"; {self.note}" if self.note else "")


class GradCheckReport:
    """What check_grads found: ``passed``, ``checks`` (order, mode, [InputCheck]),
    ``culprits`` (ops whose rule is wrong), ``kinks``."""

    def __init__(self):
        self.checks = []
        self.culprits = []
        self.notes = []

    @property
    def passed(self):
        return all(c.ok for _, _, cs in self.checks for c in cs)

    def __bool__(self):
        return self.passed

    def __str__(self):
        lines = [f"check_grads: {'passed' if self.passed else 'FAILED'}"]
        for order, mode, cs in self.checks:
            lines.append(f"  order {order}, {mode} mode:")
            lines += [f"    {c}" for c in cs]
        if self.culprits:
            lines.append("  Which gradient rule is wrong:")
            lines += [f"    {c}" for c in self.culprits]
        elif not self.passed:
            lines.append("  No single op's rule disagrees with its own forward: look at how f "
                         "combines them (a stop_gradient or a non-differentiable op on the "
                         "path?).")
        lines += [f"  {n}" for n in self.notes]
        return "\n".join(lines)

    __repr__ = __str__

    def _repr_html_(self):
        """Jupyter's display: passed/FAILED, one table row per input checked, culprits."""
        from .display import check_html
        return check_html(self)


# ---------------------------------------------------------------- numeric derivatives

def _as_arrays(args):
    """float64 copies of the float arguments (int and bool ones are passed as they are)."""
    arrays = []
    for i, a in enumerate(list(args) if isinstance(args, (list, tuple)) else [args]):
        if isinstance(a, Tensor):
            arr = np.array(E.to_host(a._array()))
        else:
            try:
                arr = np.array(a, dtype=None if isinstance(a, np.ndarray) else np.float64)
            except (TypeError, ValueError, OverflowError):
                arr = np.array(None)
            if arr.dtype.kind not in "fiub":
                raise ArgumentError(f"check_grads(f, args): args[{i}] must be a tensor, a "
                                    f"number or a nested list of numbers, got {describe(a)}")
        arrays.append(arr.astype(np.float64) if arr.dtype.kind == "f" else arr)
    return arrays


def _tensors(arrays):
    return [_tensor(a, dtype="float64") if a.dtype == np.float64 else _tensor(a)
            for a in arrays]


def _eval(fun, arrays):
    def run():
        out = fun(*_tensors(arrays))
        if not isinstance(out, Tensor):
            raise ArgumentError(f"check_grads: f must return a tensor, got "
                                f"{type(out).__name__}")
        return out.numpy().astype(np.float64)
    return scopes.tidy(run)


def _central(fun, arrays, i, j, h):
    plus = [a.copy() for a in arrays]
    minus = [a.copy() for a in arrays]
    plus[i][j] += h
    minus[i][j] -= h
    return (_eval(fun, plus) - _eval(fun, minus)) / (2 * h), _eval(fun, plus), \
        _eval(fun, minus)


def _derivative(fun, arrays, i, j, eps, base):
    """d fun / d arrays[i][j] (an array of fun's shape), whether it is a kink, and the
    (left, right) one-sided slopes of the step chosen."""
    x = arrays[i][j]
    hs = (eps,) if eps is not None else STEPS
    ests, gaps, sides = [], [], []
    for h in hs:
        hh = h * max(1.0, abs(x))
        d, fp, fm = _central(fun, arrays, i, j, hh)
        ests.append(d)
        sides.append(((base - fm) / hh, (fp - base) / hh))
        gaps.append(np.abs(sides[-1][1] - sides[-1][0]))
    if len(ests) == 1:
        best, gap_trend, side = ests[0], None, sides[0]
    else:
        # the most stable estimate: where successive step sizes agree best
        diffs = [np.max(np.abs(a - b)) for a, b in zip(ests, ests[1:])]
        k = int(np.argmin(diffs))
        best, side = ests[k + 1], sides[k + 1]
        gap_trend = (gaps[k], gaps[k + 1])
    kink = False
    if gap_trend is not None:
        g1, g2 = gap_trend
        scale = np.maximum(np.abs(best), 1.0)
        # a kink: the one-sided slopes disagree and the gap does not shrink with the step
        kink = bool(np.any((g2 > 1e-3 * scale) & (g2 > 0.5 * g1)))
    return best, kink, side


def _numeric_jacobian(fun, arrays, i, eps):
    """The central-difference jacobian, the kinks' elements, and (left, right): the
    one-sided slopes, for the kinks."""
    base = _eval(fun, arrays)
    out = np.zeros(base.shape + arrays[i].shape)
    left, right = out.copy(), out.copy()
    kinks = []
    for j in np.ndindex(arrays[i].shape):
        d, kink, (lt, rt) = _derivative(fun, arrays, i, j, eps, base)
        out[(...,) + j] = d
        left[(...,) + j], right[(...,) + j] = lt, rt
        if kink:
            kinks.append(j)
    return out, kinks, (left, right)


# ---------------------------------------------------------------- the check

MAX_ORDER = 10      # check_grads' highest derivative order


def check_grads(f, args, order=1, modes=("rev",), eps=None, rtol=None, atol=None,
                raise_on_fail=True, max_elements=4096, projections=4, seed=0):
    """Check f's derivatives (to ``order``, in each of ``modes`` 'rev'/'fwd') against central
    finite differences in float64. Returns a GradCheckReport; raises GradCheckError with the
    same text on failure when ``raise_on_fail``.

    >>> import flowgrad as tf
    >>> tf.debug.check_grads(lambda x: x.sin() * x, tf.tensor([0.5, 1.5]), order=2).passed
    True
    """
    if not callable(f):
        raise ArgumentError("check_grads(f, args): f must be a function")
    if not isinstance(modes, (list, tuple)) or not modes or not all(
            type(m) is str and m in ("rev", "fwd") for m in modes):
        raise ArgumentError(f"check_grads: modes must be a subset of ('rev', 'fwd'), got "
                            f"{describe(modes)}")
    try:
        k = as_int(order, "order", "check_grads")
    except ArgumentError:
        k = 0
    if not 1 <= k <= MAX_ORDER:     # (each order costs about twice the one before)
        raise ArgumentError(f"check_grads: order must be a positive integer (up to "
                            f"{MAX_ORDER}), got {describe(order)}")
    order = k
    eps = None if eps is None else as_number(eps, "eps", "check_grads", finite=True,
                                             positive=True)
    rtol = 1e-5 if rtol is None else as_number(rtol, "rtol", "check_grads", finite=True,
                                               minimum=0)
    atol = 1e-6 if atol is None else as_number(atol, "atol", "check_grads", finite=True,
                                               minimum=0)
    raise_on_fail = flag(raise_on_fail, "raise_on_fail", "check_grads")
    max_elements = as_int(max_elements, "max_elements", "check_grads", 0)
    projections = as_int(projections, "projections", "check_grads", 1)
    if seed is not None:
        seed = as_int(seed, "seed", "check_grads", 0)
    arrays = _as_arrays(args)
    check_arity(f, len(arrays), "check_grads(f, args)")
    diff = [i for i, a in enumerate(arrays) if a.dtype == np.float64]
    if not diff:
        raise ArgumentError("check_grads(f, args): no float input to differentiate: args "
                            "must hold at least one float tensor or number")
    rng = np.random.default_rng(seed)
    report = GradCheckReport()
    fun = _one_output(f)
    for k in range(1, order + 1):
        for mode in modes:
            try:
                checks = _check_order(fun, arrays, diff, mode, eps, rtol, atol, max_elements,
                                      projections, rng)
            except GradientError as e:
                # a rule that cannot even run (a custom gradient of the wrong shape...)
                report.checks.append((k, mode, [_Broken(e)]))
                report.culprits = find_culprits(fun, arrays, diff, rng, rtol, atol)
                if raise_on_fail:
                    raise GradCheckError(report) from e
                return report
            report.checks.append((k, mode, checks))
        if not report.passed:
            report.culprits = find_culprits(fun, arrays, diff, rng, rtol, atol)
            break
        if k < order:
            fun = _lift(fun, arrays, diff, rng)
    if raise_on_fail and not report.passed:
        raise GradCheckError(report)
    return report


def _one_output(f):
    """f itself, or, for f returning a list of tensors, their entries as one vector."""
    def fun(*ts):
        out = f(*ts)
        if isinstance(out, (list, tuple)) and out and all(isinstance(o, Tensor) for o in out):
            return OPS["concat"]([OPS["reshape"](o, (o.size,)) for o in out])
        return out
    fun.__name__ = getattr(f, "__name__", "f")
    return fun


def _lift(fun, arrays, diff, rng):
    """The next order's function: x -> sum_i <d fun / d x_i, v_i> (fun scalarised first)."""
    y = _eval(fun, arrays)
    w = rng.uniform(0.5, 1.5, y.shape)
    vs = {i: rng.uniform(0.5, 1.5, arrays[i].shape) for i in diff}

    def lifted(*ts):
        # its own recording when evaluated alone; nested (and recorded) when differentiated
        level = recording.recording_level()
        try:
            sess, owner = recording.begin_recording()
            try:
                s = (fun(*ts) * _tensor(w, dtype="float64")).sum()
            finally:
                recording.end_recording()
            xs = [ts[i] for i in diff]
            gs, _ = tape.backprop(s, OPS["fill"]((), 1, "float64"), xs, sess)
            total = None
            for g, i, x in zip(gs, diff, xs):
                if g is None:
                    g = OPS["fill"](x.shape, 0, "float64")
                term = (g * _tensor(vs[i], dtype="float64")).sum()
                total = term if total is None else total + term
            return total
        finally:
            recording.unwind_recording(level)
    return lifted


def _check_order(fun, arrays, diff, mode, eps, rtol, atol, max_elements, projections, rng):
    y = _eval(fun, arrays)
    checks = []
    for i in diff:
        x = arrays[i]
        if y.size * x.size <= max_elements:
            analytic = scopes.tidy(lambda: jacobian(fun, argnums=i, mode=mode)(
                *_tensors(arrays)).numpy()).astype(np.float64)
            numeric, kinks, sides = _numeric_jacobian(fun, arrays, i, eps)
            checks.append(InputCheck(i, x.shape, analytic, numeric, kinks, rtol, atol,
                                     lambda w, ys=y.shape: f"output {w[:len(ys)]}, element "
                                                           f"{w[len(ys):]}", sides))
        else:
            a, n = _projections(fun, arrays, i, mode, eps, projections, rng, y.shape)
            checks.append(InputCheck(
                i, x.shape, a, n, [], rtol, atol,
                lambda w: f"random projection {w[0]} (<u, J v> for random u, v: more than "
                          f"max_elements={max_elements} elements)"))
    return checks


def _projections(fun, arrays, i, mode, eps, count, rng, yshape):
    """<u, J v> for random u, v: analytic by one vjp (or jvp), numeric by a directional
    difference."""
    analytic, numeric = [], []
    for _ in range(count):
        u = rng.standard_normal(yshape)
        v = rng.standard_normal(arrays[i].shape)

        def along(t):
            shifted = [a.copy() for a in arrays]
            shifted[i] = arrays[i] + t * v
            return float((_eval(fun, shifted) * u).sum())

        def exact():
            ts = _tensors(arrays)
            if mode == "rev":
                _, pull = vjp(fun, *ts)
                return float((pull(_tensor(u, dtype="float64"))[i].numpy() * v).sum())
            tangents = [OPS["zeros_like"](t) for t in ts]
            tangents[i] = _tensor(v, dtype="float64")
            _, jv = jvp(fun, ts, tangents)
            return float((jv.numpy() * u).sum())
        analytic.append(scopes.tidy(exact))
        hs = (eps,) if eps is not None else STEPS
        ests = [(along(h) - along(-h)) / (2 * h) for h in hs]
        if len(ests) > 1:
            k = int(np.argmin([abs(a - b) for a, b in zip(ests, ests[1:])]))
            numeric.append(ests[k + 1])
        else:
            numeric.append(ests[0])
    return np.array(analytic), np.array(numeric)



# ---------------------------------------------------------------- which rule is wrong

def find_culprits(fun, arrays, diff, rng, rtol=1e-5, atol=1e-6):
    """Replay fun, recording where each op was called, and check every node's rule locally
    against central differences of that node's own forward."""
    culprits = []

    def run():
        sites.want_sites(True)
        level = recording.recording_level()
        try:
            sess, owner = recording.begin_recording()
            try:
                ts = _tensors(arrays)
                y = fun(*ts)
            finally:
                recording.end_recording()
            src = {id(ts[i]): ts[i] for i in diff}
            order, _, _ = tape.walk(y, src, sess)
            for n in order:
                c = _check_node(n, rng, rtol, atol)
                culprits.extend(c)
            _check_cuts(sess, y, src, culprits)
        finally:
            sites.want_sites(False)
            recording.unwind_recording(level)
    scopes.tidy(run)
    return culprits


def _node_forward(n):
    prim = n.prim
    if prim.strict:
        fwd = n.attrs["forward"]
        return lambda arrs: scopes.tidy(lambda: fwd(*_tensors(arrs)).numpy().astype(np.float64))
    attrs = n.attrs or {}

    def run(arrs):
        # the node's own kernel, on the active backend, with float64 host copies in and out
        # (quiet as run_kernel: finite differences across a kernel's -Inf/NaN warn nothing)
        with np.errstate(all="ignore"):
            out = prim.fwd(E.B, *[E.from_host(np.asarray(a)) for a in arrs], **attrs)
        return [np.asarray(E.to_host(o), dtype=np.float64) for o in out] if prim.multi else \
            np.asarray(E.to_host(out), dtype=np.float64)
    return run


def _check_node(n, rng, rtol, atol):
    prim = n.prim
    if prim.vjp is None or prim.name in ("Cast", "Identity"):
        return []
    arrays = [np.asarray(E.to_host(t._data)) for t in n.inputs]
    floats = [i for i, a in enumerate(arrays) if a.dtype.kind == "f"]
    if not floats:
        return []
    arr64 = [a.astype(np.float64) if a.dtype.kind == "f" else a for a in arrays]
    forward = _node_forward(n)
    out = forward(arr64)
    outs = out if isinstance(out, list) else [out]
    gs = [rng.uniform(0.5, 1.5, o.shape) for o in outs]

    def scalar(arrs):
        o = forward(arrs)
        return float(sum((oi * g).sum() for oi, g in zip(o if isinstance(o, list) else [o],
                                                          gs)))

    def rule():
        ins = _tensors(arr64)
        g_t = [_tensor(g, dtype="float64") for g in gs]
        g_arg = g_t if prim.multi else g_t[0]
        args = tuple(ins)
        if prim.save_y:
            args += tuple(_tensor(o, dtype="float64") for o in outs)
        attrs = dict(n.attrs or {})
        if prim.vjp_needs:
            r = prim.vjp(g_arg, *args, needs=tuple(True for _ in ins), **attrs)
        else:
            r = prim.vjp(g_arg, *args, **attrs)
        r = list(r) if isinstance(r, (list, tuple)) else [r]
        res = {}
        for i in floats:
            if i < len(r) and r[i] is not None:
                dx = r[i] if isinstance(r[i], Tensor) else _tensor(r[i], dtype="float64")
                if dx.shape != ins[i].shape and not prim.strict:
                    dx = tape.unbroadcast(dx, ins[i].shape, prim, i)
                res[i] = dx.numpy().astype(np.float64) if dx.shape == ins[i].shape else None
        return res
    level = recording.backward_level()
    try:
        recording.enter_backward()
        analytic = scopes.tidy(rule)
    except FlowgradError as e:
        return [Culprit(sites.op_name(n), prim.name, sites.node_site(n), "its inputs",
                        float("nan"), float("nan"), float("nan"), f"the rule fails: {e}")]
    finally:
        recording.exit_backward(level)
    found = []
    for i in floats:
        a = analytic.get(i)
        wrt = tape.input_name(prim, i)
        if a is None:
            if i in analytic:
                found.append(Culprit(sites.op_name(n), prim.name, sites.node_site(n), wrt,
                                     float("nan"), float("nan"), float("nan"),
                                     f"its gradient has the wrong shape for input {wrt}"))
            continue
        num = np.zeros_like(arr64[i])
        for j in np.ndindex(arr64[i].shape):
            x = arr64[i][j]
            ests = []
            for h in STEPS[1:4]:
                hh = h * max(1.0, abs(x))
                p = [a_.copy() for a_ in arr64]
                m = [a_.copy() for a_ in arr64]
                p[i][j] += hh
                m[i][j] -= hh
                ests.append((scalar(p) - scalar(m)) / (2 * hh))
            d = [abs(u - v) for u, v in zip(ests, ests[1:])]
            num[j] = ests[int(np.argmin(d)) + 1]
        err = np.abs(a - num)
        scale = np.maximum(np.abs(a), np.abs(num))
        tol = atol + rtol * scale
        if (err > 10 * tol).any():
            w = np.unravel_index(int(np.argmax(err)), err.shape)
            rel = err / np.where(scale > 0, scale, 1)
            found.append(Culprit(sites.op_name(n), prim.name, sites.node_site(n), wrt,
                                 float(a[w]), float(num[w]), float(err.max()),
                                 index=tuple(int(k) for k in w), max_rel=float(rel.max()),
                                 wrong=int((err > 10 * tol).sum()), size=int(err.size)))
    return found


def _check_cuts(sess, y, src, culprits):
    """stop_gradient nodes between the inputs and y: no gradient flows, yet y depends."""
    for n in sess.nodes:
        if n.prim.cut and n.inputs:
            t = n.inputs[0]
            if id(t) in src or (t._node is not None and t._node.sess is sess):
                culprits.append(Culprit(sites.op_name(n), n.prim.name, sites.node_site(n),
                                        "x", 0.0, 1.0, 1.0,
                                        "stop_gradient passes no gradient, but the value "
                                        "depends on its input"))


def check_custom_grad(op, *inputs, order=1, **kw):
    """``check_grads`` of a custom_grad op at ``inputs``: its grad_func against differences
    of its forward.

    >>> import flowgrad as tf
    >>> double = tf.custom_grad(lambda x, save: (x * 2, lambda dy, s: dy * 2))
    >>> tf.debug.check_custom_grad(double, tf.tensor([1.0, 2.0])).passed
    True
    """
    if not callable(op):
        raise ArgumentError(f"check_custom_grad(op, *inputs): op must be a function (a "
                            f"tf.custom_grad op), got {describe(op)}")
    check_arity(op, len(inputs), "check_custom_grad(op, *inputs)")
    return check_grads(lambda *xs: op(*xs), list(inputs), order=order, **kw)
