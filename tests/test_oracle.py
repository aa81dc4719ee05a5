"""An independent oracle for flowgrad's derivatives: PyTorch, in float64.

Every row of ``oracle_cases.CASES`` (the op families: unary, binary with broadcasting,
reductions and scans, shape ops, linalg, nn, image, conv/pool, losses, composites) and a
set of seeded random programs of 3-8 ops are checked against torch:

    value     f(x)
    vjp       the pullback of a cotangent (tf.vjp and tf.grads)
    grad2     second order: the gradient of <grad F, v> (nested tf.grads)
    grad3     third order, for the rows that ask for it
    hvp       tf.hvp, per argument
    hessian   tf.hessian, per argument
    hessian_blocks   tf.hessian(argnums=(0, 1, ...)): the nested blocks H[i][j]
    jac_rev / jac_fwd   tf.jacobian in both modes, all arguments at once
    jvp       tf.jvp with one primal (per argument: the others held constant)
    jvp_multi tf.jvp with all primals at once

Agreement is required to 1e-9 relative (entries far below the array's largest are held to
1e-11 of it); test_mutation_is_detected checks that scaling one gradient rule by 1 + 1e-6
fails the comparison. Inputs are sampled away from kinks and ties, where flowgrad follows
TF.js's conventions on purpose (see oracle_cases). ``-m slow`` runs a sweep of 2000 random
programs.

Install the oracle with ``pip install -e '.[oracle]'`` (PyTorch; never a runtime dependency).
"""
import zlib

import numpy as np
import pytest

T = pytest.importorskip(
    "torch", reason="the derivative oracle needs PyTorch, which the test extra does not "
    "install: pip install -e '.[oracle]'")
pytestmark = pytest.mark.extra("torch", "oracle")

import flowgrad as tf                                 # noqa: E402
from flowgrad.ops._core import PRIMITIVES             # noqa: E402

import oracle_cases as oc                             # noqa: E402
import oracle_linalg_decompositions                   # noqa: E402,F401 (rows join oc.CASES)
import oracle_linalg_matrices                         # noqa: E402,F401 (rows join oc.CASES)

RTOL = 1e-9           # relative, per entry
ATOL_REL = 1e-11      # absolute, relative to the array's largest entry
ATOL = 1e-13          # absolute: a derivative that is exactly 0 in torch (x/x) is roundoff here
N_PROGRAMS = 40       # random programs in the default run
N_PROGRAMS_SLOW = 2000


# ------------------------------------------------------------------------------ comparison

def assert_close(got, want, what):
    got = np.asarray(got.numpy() if hasattr(got, "numpy") else got, dtype=np.float64)
    want = np.asarray(_np(want) if isinstance(want, T.Tensor) else want,
                      dtype=np.float64)
    assert got.shape == want.shape, f"{what}: shape {got.shape}, torch gives {want.shape}"
    if not want.size:
        return
    err = np.abs(got - want)
    tol = RTOL * np.abs(want) + ATOL_REL * np.abs(want).max() + ATOL
    bad = ~(err <= tol)
    if bad.any():
        k = np.unravel_index(np.argmax(np.where(bad, err / tol, 0)), want.shape)
        raise AssertionError(
            f"{what}: {int(bad.sum())} of {want.size} entries differ from torch; worst at "
            f"{tuple(int(i) for i in k)}: flowgrad {got[k]!r}, torch {want[k]!r} "
            f"(relative error {err[k] / max(abs(want[k]), 1e-300):.3g})")


def _th_grads(y, xs, create_graph=False):
    """torch.autograd.grad with zeros for inputs y does not depend on."""
    if not y.requires_grad:
        return [T.zeros_like(x) for x in xs]
    gs = T.autograd.grad(y, xs, allow_unused=True, retain_graph=True,
                         create_graph=create_graph)
    return [g if g is not None else T.zeros_like(x) for g, x in zip(gs, xs)]


def _np(t):
    return t.detach().numpy(force=True)     # force: torch's ZeroTensor has no buffer


def _dot(gs, vs):
    return sum((g * v).sum() for g, v in zip(gs, vs))


def _vectorized(fn, f, xs):
    """torch's jacobian/hessian through vmap (fast); one pass per row where an op has no
    batching rule."""
    try:
        return fn(f, xs, vectorize=True)
    except (RuntimeError, NotImplementedError):
        return fn(f, xs)


class Reference:
    """Everything torch says about one case, computed once."""

    def __init__(self, case):
        self.case = case
        self.arrays = case.arrays()
        rng = np.random.default_rng(zlib.crc32(case.name.encode()) + 1)
        xs = [T.tensor(a, requires_grad=True) for a in self.arrays]
        y = case.th(*xs)
        self.value = _np(y)
        self.ct = rng.uniform(0.5, 1.5, y.shape)
        self.vs = [rng.uniform(-1, 1, a.shape) for a in self.arrays]
        self.ws = [rng.uniform(-1, 1, a.shape) for a in self.arrays]
        ct, vs, ws = T.tensor(self.ct), [T.tensor(v) for v in self.vs], \
            [T.tensor(w) for w in self.ws]
        F = (y * ct).sum()
        g = _th_grads(F, xs, create_graph=True)
        self.vjp = [_np(t) for t in g]
        h = _th_grads(_dot(g, vs), xs, create_graph=case.order >= 3)
        self.grad2 = [_np(t) for t in h]
        if case.order >= 3:
            self.grad3 = [_np(t) for t in _th_grads(_dot(h, ws), xs)]
        self.hvp = [_np(_th_grads((g[i] * vs[i]).sum(), [xs[i]])[0])
                    for i in range(case.n)]
        xd = tuple(T.tensor(a) for a in self.arrays)
        jac = _vectorized(T.autograd.functional.jacobian, case.th, xd)
        self.jac = [_np(j) for j in jac]
        self.jv = [np.tensordot(j, v, v.ndim) if v.ndim else j * v
                   for j, v in zip(self.jac, self.vs)]
        self._F = lambda *z: (case.th(*z) * ct).sum()
        self._hess = None

    @property
    def hessian(self):
        if self._hess is None:
            H = _vectorized(T.autograd.functional.hessian, self._F,
                            tuple(T.tensor(a) for a in self.arrays))
            self._hess = [[_np(b) for b in row] for row in H]
        return self._hess


_REFS = {}


def reference(case):
    ref = _REFS.get(case.name)
    if ref is None:
        ref = _REFS[case.name] = Reference(case)
    return ref


# ------------------------------------------------------------------------------ the checks

def _tensors(arrays):
    return [tf.tensor(a, dtype="float64") for a in arrays]


def _scalar(case, ct):
    ct = tf.tensor(ct, dtype="float64")
    return lambda *xs: (case.fg(*xs) * ct).sum()


def _lift(F, vs):
    """G(*xs) = sum_i <dF/dx_i, v_i>."""
    vs = _tensors(vs)

    def G(*xs):
        gs = tf.grads(F, allow_unconnected=True)(list(xs))
        return tf.add_n([(g * v).sum() for g, v in zip(gs, vs)]) if len(vs) > 1 else \
            (gs[0] * vs[0]).sum()
    return G


def check_value(case, ref):
    assert_close(case.fg(*_tensors(ref.arrays)), ref.value, f"{case.name}: value")


def check_vjp(case, ref):
    ts = _tensors(ref.arrays)
    y, pullback = tf.vjp(case.fg, *ts)
    assert_close(y, ref.value, f"{case.name}: vjp's value")
    for i, g in enumerate(pullback(tf.tensor(ref.ct, dtype="float64"))):
        assert_close(g, ref.vjp[i], f"{case.name}: vjp, input {i}")
    gs = tf.grads(_scalar(case, ref.ct), allow_unconnected=True)(ts)
    for i, g in enumerate(gs):
        assert_close(g, ref.vjp[i], f"{case.name}: grads, input {i}")


def check_grad2(case, ref):
    G = _lift(_scalar(case, ref.ct), ref.vs)
    for i, g in enumerate(tf.grads(G, allow_unconnected=True)(_tensors(ref.arrays))):
        assert_close(g, ref.grad2[i], f"{case.name}: second order, input {i}")


def check_grad3(case, ref):
    H = _lift(_lift(_scalar(case, ref.ct), ref.vs), ref.ws)
    for i, g in enumerate(tf.grads(H, allow_unconnected=True)(_tensors(ref.arrays))):
        assert_close(g, ref.grad3[i], f"{case.name}: third order, input {i}")


def check_hvp(case, ref):
    F, ts = _scalar(case, ref.ct), _tensors(ref.arrays)
    for i in range(case.n):
        hv = tf.hvp(F, argnums=i)(*ts, tf.tensor(ref.vs[i], dtype="float64"))
        assert_close(hv, ref.hvp[i], f"{case.name}: hvp, argnums={i}")


def check_hessian(case, ref):
    F, ts = _scalar(case, ref.ct), _tensors(ref.arrays)
    for i in range(case.n):
        H = tf.hessian(F, argnums=i)(*ts) if case.n > 1 else tf.hessian(F)(*ts)
        assert_close(H, ref.hessian[i][i], f"{case.name}: hessian, argnums={i}")


def check_hessian_blocks(case, ref):
    H = tf.hessian(_scalar(case, ref.ct), argnums=tuple(range(case.n)))(*_tensors(ref.arrays))
    assert isinstance(H, (tuple, list)) and len(H) == case.n, \
        f"{case.name}: hessian(argnums=(0..{case.n - 1})) gives {type(H).__name__}, not " \
        f"{case.n} rows of blocks"
    for i in range(case.n):
        assert isinstance(H[i], (tuple, list)) and len(H[i]) == case.n, \
            f"{case.name}: hessian row {i} is {type(H[i]).__name__}, not {case.n} blocks"
        for j in range(case.n):
            assert_close(H[i][j], ref.hessian[i][j], f"{case.name}: hessian block [{i}][{j}]")


def _check_jacobian(case, ref, mode):
    ts = _tensors(ref.arrays)
    if case.n == 1:
        js = [tf.jacobian(case.fg, mode=mode)(*ts)]
    else:
        js = tf.jacobian(case.fg, argnums=tuple(range(case.n)), mode=mode)(*ts)
    assert len(js) == case.n
    for i, j in enumerate(js):
        assert_close(j, ref.jac[i], f"{case.name}: jacobian mode={mode!r}, input {i}")


def check_jac_rev(case, ref):
    _check_jacobian(case, ref, "rev")


def check_jac_fwd(case, ref):
    _check_jacobian(case, ref, "fwd")


def check_jvp(case, ref):
    ts = _tensors(ref.arrays)
    for i in range(case.n):
        def f(x, i=i):
            return case.fg(*ts[:i], x, *ts[i + 1:])
        y, jv = tf.jvp(f, [ts[i]], [tf.tensor(ref.vs[i], dtype="float64")])
        assert_close(y, ref.value, f"{case.name}: jvp's value")
        assert_close(jv, ref.jv[i], f"{case.name}: jvp, primal {i} alone")


def check_jvp_multi(case, ref):
    y, jv = tf.jvp(case.fg, _tensors(ref.arrays), _tensors(ref.vs))
    assert_close(y, ref.value, f"{case.name}: jvp's value")
    assert_close(jv, sum(ref.jv), f"{case.name}: jvp of {case.n} primals")


CHECKS = {name[6:]: fn for name, fn in globals().items() if name.startswith("check_")}


def checks_for(case):
    names = ["value", "vjp", "grad2", "hvp", "hessian", "jac_rev", "jac_fwd", "jvp"]
    if case.order >= 3:
        names.append("grad3")
    if case.n > 1:
        names += ["hessian_blocks", "jvp_multi"]
    return names


def run_checks(case, ref=None):
    """Every check of a case; all failures reported together, each naming its check."""
    ref = ref or reference(case)
    failures = []
    for check in checks_for(case):
        try:
            CHECKS[check](case, ref)
        except AssertionError as e:
            failures.append(str(e))
        except Exception as e:        # flowgrad raised where torch has an answer
            failures.append(f"{case.name}: {check} raised {type(e).__name__}: {e}")
    if failures:
        raise AssertionError("\n".join(failures))
    return len(checks_for(case))


# ------------------------------------------------------------------------------ the tests

@pytest.mark.parametrize("case", oc.CASES, ids=repr)
def test_op(case):
    run_checks(case)


_PROGRAMS = {}


def program(seed):
    if seed not in _PROGRAMS:
        _PROGRAMS[seed] = oc.random_program(seed)
    return _PROGRAMS[seed]


@pytest.mark.parametrize("seed", range(N_PROGRAMS))
def test_random_program(seed):
    run_checks(program(seed))


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(N_PROGRAMS, N_PROGRAMS + N_PROGRAMS_SLOW))
def test_random_program_sweep(seed):
    c = oc.random_program(seed)
    run_checks(c, Reference(c))


# ------------------------------------------------------------------------ the oracle's own checks

def test_table_covers_every_family():
    families = {c.name.split("/")[0] for c in oc.CASES}
    assert families >= {"unary", "binary", "reduce", "scan", "shape", "linalg", "nn", "image",
                        "conv", "pool", "losses", "composite"}
    assert len({c.name for c in oc.CASES}) == len(oc.CASES), "case names must be unique"


def test_random_programs_are_seeded():
    a, b = oc.random_program(7), oc.random_program(7)
    assert a.name == b.name
    for x, y in zip(a.arrays(), b.arrays()):
        np.testing.assert_array_equal(x, y)
    lengths = [len(program(s).name.split(";")) for s in range(N_PROGRAMS)]
    assert min(lengths) >= 3 and max(lengths) <= 8


MUTATIONS = [("Sin", "unary/sin"), ("Multiply", "binary/mul[3x4-4]"),
             ("Conv2D", "conv/conv2d[same,s=2,d=1]"), ("Softmax", "nn/softmax[axis=-1]")]


def _expected(ref, check):
    """What torch gives for a check, all arrays in one vector."""
    parts = {"vjp": lambda: ref.vjp, "grad2": lambda: ref.grad2, "grad3": lambda: ref.grad3,
             "hvp": lambda: ref.hvp, "jac_rev": lambda: ref.jac, "jac_fwd": lambda: ref.jac,
             "jvp": lambda: ref.jv, "jvp_multi": lambda: [sum(ref.jv)],
             "hessian": lambda: [ref.hessian[i][i] for i in range(ref.case.n)],
             "hessian_blocks": lambda: [b for row in ref.hessian for b in row]}[check]()
    return np.concatenate([np.ravel(p) for p in parts])


def _scale(out, by=1 + 1e-6):
    """A rule's result (a gradient, a tuple/list of them, or None entries) times ``by``."""
    if isinstance(out, (tuple, list)):
        return type(out)(None if g is None else g * by for g in out)
    return None if out is None else out * by


# a bilinear op's diagonal Hessian blocks are 0: no scaling of its rule shows there
BILINEAR = {"Multiply", "Conv2D"}


@pytest.mark.parametrize("kernel, name, check", [
    pytest.param(k, n, check, id=f"{k}-{check}") for k, n in MUTATIONS
    for check in checks_for(next(c for c in oc.CASES if c.name == n))
    if check != "value" and not (k in BILINEAR and check in ("hvp", "hessian"))])
def test_mutation_is_detected(kernel, name, check, monkeypatch):
    """One gradient rule scaled by 1 + 1e-6 must fail the comparison: the tolerances are
    tight enough to see a wrong constant in any rule."""
    case = next(c for c in oc.CASES if c.name == name)
    ref = reference(case)
    assert _expected(ref, check).any(), f"{name}: {check} is 0, no mutation can show"
    prim = PRIMITIVES[kernel]
    rule = prim.vjp

    monkeypatch.setattr(prim, "vjp", lambda *a, **k: _scale(rule(*a, **k)))
    with pytest.raises(AssertionError, match="differ from torch"):
        CHECKS[check](case, ref)
    monkeypatch.undo()
    CHECKS[check](case, ref)          # and the rule restored passes again


PROGRAM_KERNELS = [("sin", "Sin"), ("exp", "Exp"), ("mul", "Multiply"), ("div", "RealDiv"),
                   ("softmax", "Softmax"), ("mat_mul", "BatchMatMul")]


@pytest.mark.parametrize("op, kernel", PROGRAM_KERNELS, ids=[k for _, k in PROGRAM_KERNELS])
def test_mutation_is_detected_in_programs(op, kernel, monkeypatch):
    """The same for the random programs: the first default program that uses the op fails
    once the op's rule is scaled by 1 + 1e-6."""
    seed = next((s for s in range(N_PROGRAMS) if f"={op}(" in program(s).name), None)
    if seed is None:
        pytest.skip(f"no default program uses {op}")
    c = program(seed)
    prim = PRIMITIVES[kernel]
    rule = prim.vjp
    monkeypatch.setattr(prim, "vjp", lambda *a, **k: _scale(rule(*a, **k)))
    with pytest.raises(AssertionError, match="differ from torch"):
        run_checks(c)
