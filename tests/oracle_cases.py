"""The oracle's table: every op family of flowgrad beside an independent PyTorch version of
the same function, and a generator of seeded random programs. Used by test_oracle.py.

A ``Case`` is a function of one or more float64 tensors, written twice: ``fg`` with
flowgrad ops, ``th`` with torch ops. Non-differentiable arguments (indices, conditions,
one-hot labels) are constants inside both. Inputs are sampled away from kinks and ties,
where flowgrad follows TF.js's conventions on purpose (relu'(0)=0, abs'(0)=-1, max ties):
the oracle checks the mathematics, not conventions. The torch versions are written from
the mathematical (TF.js) definition of each op, never from flowgrad's code.

Without torch this module still imports (pytest collects it for doctests); test_oracle.py
then skips with its reason.
"""
import math
import zlib
from dataclasses import dataclass

import numpy as np

import flowgrad as tf

try:
    import torch as T
    import torch.nn.functional as F
except ImportError:          # test_oracle.py skips, naming the missing extra
    T = F = None

DOMAINS = {
    "real": lambda r, s: r.uniform(-2, 2, s),
    "pos": lambda r, s: r.uniform(0.5, 2, s),
    "unit": lambda r, s: r.uniform(-0.9, 0.9, s),
    "gt1": lambda r, s: r.uniform(1.2, 3, s),
    "prob": lambda r, s: r.uniform(0.1, 0.9, s),
    # away from the kink at 0
    "nz": lambda r, s: r.choice([-1, 1], s) * r.uniform(0.2, 2, s),
    # both sides of 0 and of 6 (relu6), away from both
    "wide": lambda r, s: r.choice([-1, 1, 1], s) * r.uniform(0.3, 5.7, s)
    + r.choice([0, 0, 6.6], s) * 1.0,
}


@dataclass
class Case:
    """One row: ``fg`` (flowgrad) and ``th`` (torch) compute the same function of the
    float64 inputs described by ``inputs`` (one (shape, domain) per differentiable input).
    ``order``: the highest reverse-mode order checked (3 adds a third-order check)."""
    name: str
    fg: object
    th: object
    inputs: list
    order: int = 2
    seed: int = None
    fixed: list = None           # the input arrays, when given (random programs)

    def __repr__(self):
        return self.name

    @property
    def n(self):
        return len(self.inputs)

    def arrays(self):
        if self.fixed is not None:
            return [a.copy() for a in self.fixed]
        seed = self.seed if self.seed is not None else zlib.crc32(self.name.encode())
        rng = np.random.default_rng(seed)
        return [np.asarray(DOMAINS[d](rng, s), dtype=np.float64) for s, d in self.inputs]


CASES = []


def case(name, fg, th, *inputs, order=2):
    CASES.append(Case(name, fg, th, list(inputs), order))


def tt(a):
    """A torch constant from a NumPy constant (float64, int64 or bool)."""
    a = np.asarray(a)
    if a.dtype.kind == "f":
        return T.tensor(a, dtype=T.float64)
    if a.dtype.kind == "b":
        return T.tensor(a)
    return T.tensor(a, dtype=T.int64)


def fc(a):
    """A flowgrad constant from a NumPy constant (float64 or int32 or bool)."""
    a = np.asarray(a)
    if a.dtype.kind == "f":
        return tf.tensor(a, dtype="float64")
    if a.dtype.kind == "b":
        return tf.tensor(a, dtype="bool")
    return tf.tensor(a.astype(np.int32), dtype="int32")


def fg_cat(outs):
    """Several outputs as one vector (multi-output ops)."""
    return tf.concat([tf.reshape(o, [-1]) for o in outs], 0)


def th_cat(outs):
    return T.cat([o.reshape(-1) for o in outs])


_C = np.random.default_rng(12345)     # constants of the table (indices, labels, weights)


# ------------------------------------------------------------------------------ unary

SELU_SCALE, SELU_ALPHA = 1.0507009873554805, 1.6732632423543772


def th_softplus(x):
    # not F.softplus: it returns x itself above its threshold (20), off by exp(-x)
    return T.logaddexp(x, T.zeros_like(x))


UNARY = [
    # name, flowgrad, torch, domain
    ("abs", tf.abs, T and T.abs, "nz"),
    ("acos", tf.acos, T and T.acos, "unit"),
    ("acosh", tf.acosh, T and T.acosh, "gt1"),
    ("asin", tf.asin, T and T.asin, "unit"),
    ("asinh", tf.asinh, T and T.asinh, "real"),
    ("atan", tf.atan, T and T.atan, "real"),
    ("atanh", tf.atanh, T and T.atanh, "unit"),
    ("cos", tf.cos, T and T.cos, "real"),
    ("cosh", tf.cosh, T and T.cosh, "real"),
    ("elu", tf.elu, F and F.elu, "nz"),
    ("erf", tf.erf, T and T.erf, "real"),
    ("exp", tf.exp, T and T.exp, "real"),
    ("expm1", tf.expm1, T and T.expm1, "real"),
    ("log", tf.log, T and T.log, "pos"),
    ("log1p", tf.log1p, T and T.log1p, "pos"),
    ("log_sigmoid", tf.log_sigmoid, F and F.logsigmoid, "real"),
    ("neg", tf.neg, T and T.neg, "real"),
    ("reciprocal", tf.reciprocal, T and T.reciprocal, "nz"),
    ("relu", tf.relu, T and T.relu, "nz"),
    ("relu6", tf.relu6, F and F.relu6, "wide"),
    ("rsqrt", tf.rsqrt, T and T.rsqrt, "pos"),
    ("selu", tf.selu, lambda x: SELU_SCALE * T.where(x > 0, x, SELU_ALPHA * T.expm1(x)), "nz"),
    ("sigmoid", tf.sigmoid, T and T.sigmoid, "real"),
    ("sin", tf.sin, T and T.sin, "real"),
    ("sinh", tf.sinh, T and T.sinh, "real"),
    ("softplus", tf.softplus, th_softplus, "real"),
    ("sqrt", tf.sqrt, T and T.sqrt, "pos"),
    ("square", tf.square, T and T.square, "real"),
    ("tan", tf.tan, T and T.tan, "unit"),
    ("tanh", tf.tanh, T and T.tanh, "real"),
    ("leaky_relu", lambda x: tf.leaky_relu(x, 0.3), lambda x: F.leaky_relu(x, 0.3), "nz"),
    ("clip_by_value", lambda x: tf.clip_by_value(x, -0.5, 0.7),
     lambda x: T.clamp(x, -0.5, 0.7), "real"),
    # piecewise constant: zero gradient at every order (torch: the same, by autograd)
    ("floor", tf.floor, T and T.floor, "real"),
    ("ceil", tf.ceil, T and T.ceil, "real"),
    ("round", tf.round, T and T.round, "real"),
    ("sign", tf.sign, T and T.sign, "nz"),
    ("step", tf.step, lambda x: (x > 0).to(x.dtype), "nz"),
    ("clone", tf.clone, T and T.clone, "real"),
    ("identity_stop_gradient", lambda x: x * tf.stop_gradient(x),
     lambda x: x * x.detach(), "real"),
]
for _n, _f, _t, _d in UNARY:
    case(f"unary/{_n}", _f, _t, ((2, 3), _d), order=3)
case("unary/sin-scalar", tf.sin, T and T.sin, ((), "real"), order=3)
case("unary/exp-chain", lambda x: x.square().exp().log1p().tanh(),
     lambda x: T.tanh(T.log1p(T.exp(x * x))), ((5,), "unit"), order=3)
case("unary/pow-scalar-exponent", lambda x: tf.pow(x, 2.5), lambda x: x ** 2.5,
     ((2, 3), "pos"), order=3)

# ------------------------------------------------------------------------------ binary

BINARY = [
    ("add", tf.add, T and T.add, "real", "real"),
    ("sub", tf.sub, T and T.sub, "real", "real"),
    ("mul", tf.mul, T and T.mul, "real", "real"),
    ("div", tf.div, T and T.div, "real", "nz"),
    ("div_no_nan", tf.div_no_nan, T and T.div, "real", "nz"),
    ("pow", tf.pow, T and T.pow, "pos", "real"),
    ("atan2", tf.atan2, T and T.atan2, "nz", "nz"),
    ("squared_difference", tf.squared_difference, lambda a, b: (a - b) ** 2, "real", "real"),
    ("maximum", tf.maximum, T and T.maximum, "real", "real"),
    ("minimum", tf.minimum, T and T.minimum, "real", "real"),
    ("mod", tf.mod, T and T.remainder, "real", "nz"),
    # [conv] floor_div's gradient is real division's (TF.js): torch straight-through
    ("floor_div", tf.floor_div,
     lambda a, b: (a / b) + (T.floor(a / b) - a / b).detach(), "real", "nz"),
    ("prelu", tf.prelu, lambda x, a: T.where(x > 0, x, a * x), "nz", "pos"),
]
SHAPES = [((2, 3), (2, 3)), ((3, 4), (4,)), ((3, 1), (1, 4)), ((), (2, 3)),
          ((2, 1, 3), (4, 1))]
for _n, _f, _t, _da, _db in BINARY:
    for _sa, _sb in SHAPES:
        if _n == "prelu" and len(_sb) > len(_sa):
            continue
        _tag = "x".join(map(str, _sa)) + "-" + "x".join(map(str, _sb))
        case(f"binary/{_n}[{_tag}]", _f, _t, (_sa, _da), (_sb, _db))
case("binary/operators", lambda a, b: (a + b) * a - b / (a * a + 1) + (-a) ** 2,
     lambda a, b: (a + b) * a - b / (a * a + 1) + (-a) ** 2, ((3,), "real"), ((2, 3), "real"),
     order=3)
case("binary/mul-self", lambda a: a * a * a, lambda a: a * a * a, ((4,), "real"), order=3)
case("binary/add_n", lambda a, b, c: tf.add_n([a, b, c, a]), lambda a, b, c: a + b + c + a,
     ((2, 2), "real"), ((2, 2), "real"), ((2, 2), "real"))
_cond = _C.random((3, 4)) > 0.5
case("binary/where", lambda a, b: tf.where(fc(_cond), a, b),
     lambda a, b: T.where(tt(_cond), a, b), ((3, 4), "real"), ((4,), "real"))

# ------------------------------------------------------------------------------ reductions

for _n, _f, _t in [
    ("sum", tf.sum, lambda x, ax, kd: x.sum(ax, keepdim=kd) if ax is not None else x.sum()),
    ("mean", tf.mean, lambda x, ax, kd: x.mean(ax, keepdim=kd) if ax is not None else x.mean()),
    ("prod", tf.prod, lambda x, ax, kd: _th_prod(x, ax, kd)),
    ("max", tf.max, lambda x, ax, kd: T.amax(x, ax, keepdim=kd) if ax is not None else x.max()),
    ("min", tf.min, lambda x, ax, kd: T.amin(x, ax, keepdim=kd) if ax is not None else x.min()),
    ("log_sum_exp", tf.log_sum_exp,
     lambda x, ax, kd: T.logsumexp(x, ax if ax is not None else tuple(range(x.dim())),
                                   keepdim=kd)),
    ("euclidean_norm", tf.euclidean_norm,
     lambda x, ax, kd: T.sqrt((x * x).sum(ax, keepdim=kd)) if ax is not None
     else T.sqrt((x * x).sum())),
]:
    for _ax, _kd in [(None, False), (1, False), (0, True), ((0, 2), False), (-1, True)]:
        _dom = "pos" if _n == "prod" else "real"
        case(f"reduce/{_n}[axis={_ax},keep={_kd}]",
             (lambda f, ax, kd: lambda x: f(x, list(ax) if isinstance(ax, tuple) else ax, kd))(
                 _f, _ax, _kd),
             (lambda t, ax, kd: lambda x: t(x, ax, kd))(_t, _ax, _kd),
             ((2, 3, 2), _dom))


def _th_prod(x, ax, kd):
    if ax is None:
        return x.prod()
    axes = (ax,) if isinstance(ax, int) else ax
    for a in sorted((a % x.dim() for a in axes), reverse=True):
        x = x.prod(a, keepdim=True)
    if not kd:
        x = x.squeeze(tuple(a % (x.dim()) for a in axes))
    return x


_NORMS = [("euclidean", None, ((5,), "nz")), (1, None, ((5,), "nz")), (2, 0, ((4, 3), "nz")),
          (np.inf, None, ((5,), "nz")), (-np.inf, None, ((5,), "nz")), (3, -1, ((2, 4), "nz")),
          ("fro", (0, 1), ((3, 4), "nz")), (1, (0, 1), ((3, 4), "nz")),
          (np.inf, (0, 1), ((3, 4), "nz")), ("euclidean", None, ((2, 3), "nz"))]
_NORMS = [(o, ax, sh, f"{o},axis={ax}" + (",2d" if ax is None and len(sh[0]) == 2 else ""))
          for o, ax, sh in _NORMS]


def _th_norm(x, ordr, ax):
    if isinstance(ax, tuple):          # matrix norms
        if ordr == "fro":
            return T.sqrt((x * x).sum())
        if ordr == 1:
            return x.abs().sum(0).max()
        return x.abs().sum(1).max()
    if ax is None:
        x, ax = x.reshape(-1), 0
    if ordr in ("euclidean", 2):
        return T.sqrt((x * x).sum(ax))
    if ordr == np.inf:
        return x.abs().amax(ax)
    if ordr == -np.inf:
        return x.abs().amin(ax)
    return (x.abs() ** ordr).sum(ax) ** (1.0 / ordr)


for _o, _ax, _in, _tag in _NORMS:
    case(f"reduce/norm[ord={_tag}]",
         (lambda o, ax: lambda x: tf.norm(x, o, list(ax) if isinstance(ax, tuple) else ax))(
             _o, _ax),
         (lambda o, ax: lambda x: _th_norm(x, o, ax))(_o, _ax), _in)
case("reduce/moments", lambda x: fg_cat(tf.moments(x, [0, 1])),
     lambda x: th_cat([x.mean((0, 1)), x.var((0, 1), unbiased=False)]), ((3, 2, 2), "real"))
case("reduce/moments-all-keep", lambda x: fg_cat(tf.moments(x, None, True)),
     lambda x: th_cat([x.mean(), x.var(unbiased=False)]), ((2, 3), "real"))


def _th_scan(x, axis, exclusive, reverse, op):
    if reverse:
        x = x.flip(axis)
    y = T.cumsum(x, axis) if op == "sum" else T.cumprod(x, axis)
    if exclusive:
        first = T.zeros_like(x.narrow(axis, 0, 1)) + (0.0 if op == "sum" else 1.0)
        y = T.cat([first, y.narrow(axis, 0, x.shape[axis] - 1)], axis)
    return y.flip(axis) if reverse else y


for _op, _tfn, _dom in [("sum", tf.cumsum, "real"), ("prod", tf.cumprod, "pos")]:
    for _ax, _ex, _rv in [(0, False, False), (1, True, False), (1, False, True),
                          (0, True, True), (-1, False, False)]:
        case(f"scan/cum{_op}[axis={_ax},excl={_ex},rev={_rv}]",
             (lambda f, ax, ex, rv: lambda x: f(x, ax, ex, rv))(_tfn, _ax, _ex, _rv),
             (lambda op, ax, ex, rv: lambda x: _th_scan(x, ax, ex, rv, op))(_op, _ax, _ex, _rv),
             ((3, 4), _dom))

# ------------------------------------------------------------------------------ shape ops

case("shape/reshape", lambda x: tf.reshape(x, [3, 2, 2]) * 1.5,
     lambda x: x.reshape(3, 2, 2) * 1.5, ((4, 3), "real"))
case("shape/transpose", lambda x: tf.transpose(x, [2, 0, 1]).sin(),
     lambda x: x.permute(2, 0, 1).sin(), ((2, 3, 4), "real"))
case("shape/transpose-default", lambda x: tf.transpose(x).exp(),
     lambda x: x.T.exp(), ((2, 3), "real"))
case("shape/concat", lambda a, b, c: tf.concat([a, b, c], 1),
     lambda a, b, c: T.cat([a, b, c], 1), ((2, 1), "real"), ((2, 3), "real"), ((2, 2), "real"))
case("shape/concat-axis0", lambda a, b: tf.concat([a, b, a], 0) ** 2,
     lambda a, b: T.cat([a, b, a], 0) ** 2, ((2, 3), "real"), ((1, 3), "real"))
case("shape/stack", lambda a, b: tf.stack([a, b, a * b], 1),
     lambda a, b: T.stack([a, b, a * b], 1), ((2, 3), "real"), ((2, 3), "real"))
case("shape/split", lambda x: (lambda p: p[0] * 2 + p[2].sum() - p[1].sin().sum(1, True))(
    tf.split(x, [2, 1, 2], 1)),
    lambda x: (lambda p: p[0] * 2 + p[2].sum() - p[1].sin().sum(1, True))(
    T.split(x, [2, 1, 2], 1)), ((3, 5), "real"))
case("shape/split-even", lambda x: fg_cat(tf.split(x, 2, 0)[::-1]),
     lambda x: th_cat(T.split(x, 2, 0)[::-1]), ((4, 3), "real"))
case("shape/unstack", lambda x: (lambda u: u[0] * u[2] + u[1])(tf.unstack(x, 1)),
     lambda x: (lambda u: u[0] * u[2] + u[1])(T.unbind(x, 1)), ((2, 3, 2), "real"))
case("shape/slice", lambda x: tf.slice(x, [1, 0], [2, -1]).square(),
     lambda x: x[1:3, :].square(), ((4, 3), "real"))
case("shape/strided_slice", lambda x: tf.strided_slice(x, [0, 1], [4, 4], [2, 1]).exp(),
     lambda x: x[0:4:2, 1:4].exp(), ((5, 4), "real"))
case("shape/strided_slice-masks",
     lambda x: tf.strided_slice(x, [1, 0, 0], [0, 3, 0], [1, 2, 1], begin_mask=0b100,
                                end_mask=0b101, shrink_axis_mask=0b000),
     lambda x: x[1:, 0:3:2, :], ((3, 4, 2), "real"))
_gi = np.array([2, 0, 2, 1])
case("shape/gather", lambda x: tf.gather(x, fc(_gi), 1), lambda x: x.index_select(1, tt(_gi)),
     ((2, 3), "real"))
_gi2 = np.array([[1, 0], [1, 1]])
case("shape/gather-2d-indices", lambda x: tf.gather(x, fc(_gi2)) * x.sum(),
     lambda x: x[tt(_gi2)] * x.sum(), ((3, 2), "real"))
_gnd = np.array([[0, 1], [2, 0], [0, 1]])
case("shape/gather_nd", lambda x: tf.gather_nd(x, fc(_gnd)),
     lambda x: x[tt(_gnd[:, 0]), tt(_gnd[:, 1])], ((3, 2, 2), "real"))
case("shape/pad", lambda x: tf.pad(x, [[1, 0], [0, 2]], 1.5).sin(),
     lambda x: F.pad(x, (0, 2, 1, 0), value=1.5).sin(), ((2, 3), "real"))


def _mirror_index(n, before, after, mode):
    """Indices of a mirror-padded axis of length n (computed here, independently)."""
    k = 0 if mode == "symmetric" else 1        # reflect leaves the edge out
    idx = []
    for i in range(-before, n + after):
        j = i
        while j < 0 or j >= n:
            j = (-j - 1 + k) if j < 0 else (2 * n - 1 - j - k)
        idx.append(j)
    return np.array(idx)


def _th_mirror(x, pads, mode):
    for ax, (b, a) in enumerate(pads):
        x = x.index_select(ax, tt(_mirror_index(x.shape[ax], b, a, mode)))
    return x


for _mode, _pads in [("reflect", [[1, 2], [2, 1]]), ("symmetric", [[2, 1], [0, 3]])]:
    case(f"shape/mirror_pad[{_mode}]",
         (lambda m, p: lambda x: tf.mirror_pad(x, p, m) ** 2)(_mode, _pads),
         (lambda m, p: lambda x: _th_mirror(x, p, m) ** 2)(_mode, _pads), ((3, 4), "real"))
case("shape/tile", lambda x: tf.tile(x, [2, 3]) * tf.tile(x, [2, 3]).cos(),
     lambda x: x.repeat(2, 3) * x.repeat(2, 3).cos(), ((2, 2), "real"))
case("shape/reverse", lambda x: tf.reverse(x, [0, 2]) * fc(np.arange(12.).reshape(2, 3, 2)),
     lambda x: x.flip((0, 2)) * tt(np.arange(12.).reshape(2, 3, 2)), ((2, 3, 2), "real"))
case("shape/broadcast_to", lambda x: tf.broadcast_to(x, [2, 3, 4]).sin(),
     lambda x: x.expand(2, 3, 4).sin(), ((3, 1), "real"))
case("shape/expand_squeeze", lambda x: tf.squeeze(tf.expand_dims(x, 1) * 2, [1]) ** 3,
     lambda x: (x.unsqueeze(1) * 2).squeeze(1) ** 3, ((3, 2), "real"))
case("shape/flatten", lambda x: tf.reshape(x, [-1]).cos(),
     lambda x: x.reshape(-1).cos(), ((2, 3), "real"))
_seg = np.array([0, 2, 0, 1])
case("shape/unsorted_segment_sum", lambda x: tf.unsorted_segment_sum(x, fc(_seg), 3),
     lambda x: T.zeros(3, 2, dtype=x.dtype).index_add(0, tt(_seg), x), ((4, 2), "real"))
_sci = np.array([[1], [3], [1]])
case("shape/scatter_nd", lambda u: tf.scatter_nd(fc(_sci), u, [4, 2]),
     lambda u: T.zeros(4, 2, dtype=u.dtype).index_put((tt(_sci[:, 0]),), u, accumulate=True),
     ((3, 2), "real"))
_tsi = np.array([[2], [0]])
case("shape/tensor_scatter_update", lambda t, u: tf.tensor_scatter_update(t, fc(_tsi), u),
     lambda t, u: t.index_put((tt(_tsi[:, 0]),), u), ((3, 2), "real"), ((2, 2), "real"))
case("shape/top_k", lambda x: tf.top_k(x, 2)[0], lambda x: T.topk(x, 2).values,
     ((3, 4), "real"))
case("shape/diag", lambda x: tf.diag(x) * 2, lambda x: T.diag(x) * 2, ((3,), "real"))


def _th_d2s(x, bs):
    n, h, w, c = x.shape
    return (x.reshape(n, h, w, bs, bs, c // bs // bs).permute(0, 1, 3, 2, 4, 5)
            .reshape(n, h * bs, w * bs, c // bs // bs))


def _th_s2d(x, bs):
    n, h, w, c = x.shape
    return (x.reshape(n, h // bs, bs, w // bs, bs, c).permute(0, 1, 3, 2, 4, 5)
            .reshape(n, h // bs, w // bs, bs * bs * c))


case("shape/depth_to_space", lambda x: tf.depth_to_space(x, 2).sin(),
     lambda x: _th_d2s(x, 2).sin(), ((1, 2, 2, 8), "real"))
case("shape/space_to_depth", lambda x: tf.space_to_depth(x, 2).sin(),
     lambda x: _th_s2d(x, 2).sin(), ((1, 4, 2, 2), "real"))


def _th_s2b(x, block, pads):
    x = F.pad(x, (0, 0, pads[1][0], pads[1][1], pads[0][0], pads[0][1]))
    n, h, w, c = x.shape
    bh, bw = block
    x = x.reshape(n, h // bh, bh, w // bw, bw, c).permute(2, 4, 0, 1, 3, 5)
    return x.reshape(bh * bw * n, h // bh, w // bw, c)


def _th_b2s(x, block, crops):
    b, h, w, c = x.shape
    bh, bw = block
    n = b // (bh * bw)
    x = x.reshape(bh, bw, n, h, w, c).permute(2, 3, 0, 4, 1, 5).reshape(n, h * bh, w * bw, c)
    return x[:, crops[0][0]:h * bh - crops[0][1], crops[1][0]:w * bw - crops[1][1], :]


case("shape/space_to_batch_nd", lambda x: tf.space_to_batch_nd(x, [2, 2], [[1, 1], [0, 2]]),
     lambda x: _th_s2b(x, [2, 2], [[1, 1], [0, 2]]), ((1, 2, 2, 2), "real"))
case("shape/batch_to_space_nd", lambda x: tf.batch_to_space_nd(x, [2, 2], [[0, 1], [1, 0]]),
     lambda x: _th_b2s(x, [2, 2], [[0, 1], [1, 0]]), ((4, 2, 2, 1), "real"))

# ------------------------------------------------------------------------------ linalg

for _ta, _tb in [(False, False), (True, False), (False, True), (True, True)]:
    _sa = (4, 3) if _ta else (3, 4)
    _sb = (2, 4) if _tb else (4, 2)
    case(f"linalg/mat_mul[ta={_ta},tb={_tb}]",
         (lambda ta, tb: lambda a, b: tf.mat_mul(a, b, ta, tb))(_ta, _tb),
         (lambda ta, tb: lambda a, b: (a.T if ta else a) @ (b.T if tb else b))(_ta, _tb),
         (_sa, "real"), (_sb, "real"))
case("linalg/mat_mul-batched-broadcast", lambda a, b: tf.mat_mul(a, b),
     lambda a, b: a @ b, ((2, 2, 3), "real"), ((3, 2), "real"))
case("linalg/mat_mul-batched-transpose", lambda a, b: tf.mat_mul(a, b, False, True),
     lambda a, b: a @ b.transpose(-1, -2), ((2, 2, 3), "real"), ((2, 2, 3), "real"))
case("linalg/matmul-operator-chain", lambda a, b: (a @ b @ a).tanh(),
     lambda a, b: (a @ b @ a).tanh(), ((3, 3), "real"), ((3, 3), "real"), order=3)
case("linalg/dot-vv", tf.dot, lambda a, b: a @ b, ((4,), "real"), ((4,), "real"))
case("linalg/dot-mv", tf.dot, lambda a, b: a @ b, ((3, 4), "real"), ((4,), "real"))
case("linalg/dot-vm", tf.dot, lambda a, b: a @ b, ((3,), "real"), ((3, 2), "real"))
case("linalg/outer_product", tf.outer_product, T and T.outer, ((3,), "real"), ((2,), "real"))
for _eq, _shapes in [("ij,jk->ik", [(2, 3), (3, 2)]), ("ij->ji", [(2, 3)]),
                     ("bij,bjk->bik", [(2, 2, 3), (2, 3, 2)]), ("i,i->", [(4,), (4,)]),
                     ("ij,j->i", [(3, 2), (2,)]), ("ii->i", [(3, 3)])]:
    case(f"linalg/einsum[{_eq}]", (lambda e: lambda *xs: tf.einsum(e, *xs))(_eq),
         (lambda e: lambda *xs: T.einsum(e, *xs))(_eq), *[(s, "real") for s in _shapes])


def _band_mask(m, n, lo, up):
    i, j = np.indices((m, n))
    return ((lo < 0) | (i - j <= lo)) & ((up < 0) | (j - i <= up))


for _lo, _up in [(1, 0), (0, -1), (-1, 1)]:
    case(f"linalg/band_part[{_lo},{_up}]",
         (lambda lo, up: lambda a: tf.linalg.band_part(a, lo, up).exp())(_lo, _up),
         (lambda lo, up: lambda a: (a * tt(_band_mask(3, 4, lo, up).astype(float))).exp())(
             _lo, _up), ((3, 4), "real"))


def _th_gram_schmidt(x):
    ys = []
    for i in range(x.shape[0]):
        v = x[i]
        for y in ys:
            v = v - (v * y).sum() * y
        ys.append(v / T.sqrt((v * v).sum()))
    return T.stack(ys)


case("linalg/gram_schmidt", tf.linalg.gram_schmidt, _th_gram_schmidt, ((3, 4), "real"))


def _fg_qr(a):
    # a QR is unique up to the signs of R's diagonal (flowgrad's square QR leaves the last
    # one as Householder gives it, LAPACK/torch too, but they need not agree): compare the
    # factorization whose R has a positive diagonal
    q, r = tf.linalg.qr(a)
    k = r.shape[0]
    d = tf.sign((r[:, :k] * tf.eye(k, k, None, "float64")).sum(1))
    return fg_cat([q * d, r * tf.reshape(d, [-1, 1])])


def _th_qr(a):
    q, r = T.linalg.qr(a)
    d = T.sign(T.diagonal(r))
    return th_cat([q * d, r * d[:, None]])


case("linalg/qr", _fg_qr, _th_qr, ((4, 3), "real"))
case("linalg/qr-square", _fg_qr, _th_qr, ((3, 3), "real"))

# ------------------------------------------------------------------------------ nn

for _ax in [-1, 0]:
    case(f"nn/softmax[axis={_ax}]", (lambda ax: lambda x: tf.softmax(x, ax))(_ax),
         (lambda ax: lambda x: T.softmax(x, ax))(_ax), ((3, 4), "real"), order=3)
    case(f"nn/log_softmax[axis={_ax}]", (lambda ax: lambda x: tf.log_softmax(x, ax))(_ax),
         (lambda ax: lambda x: T.log_softmax(x, ax))(_ax), ((3, 4), "real"), order=3)
case("nn/batch_norm", lambda x, m, v, o, s: tf.batch_norm(x, m, v, o, s, 0.01),
     lambda x, m, v, o, s: (x - m) / T.sqrt(v + 0.01) * s + o,
     ((2, 3), "real"), ((3,), "real"), ((3,), "pos"), ((3,), "real"), ((3,), "real"))
case("nn/batch_norm-no-affine", lambda x, m, v: tf.batch_norm(x, m, v),
     lambda x, m, v: (x - m) / T.sqrt(v + 0.001), ((2, 2, 3), "real"), ((3,), "real"),
     ((3,), "pos"))


def _th_lrn(x, r, bias, alpha, beta):
    sq = F.pad(x * x, (r, r))
    c = x.shape[-1]
    s = sum(sq[..., k:k + c] for k in range(2 * r + 1))
    return x / (bias + alpha * s) ** beta


case("nn/local_response_normalization",
     lambda x: tf.local_response_normalization(x, 2, 1.5, 0.3, 0.75),
     lambda x: _th_lrn(x, 2, 1.5, 0.3, 0.75), ((1, 2, 2, 5), "real"))
case("nn/leaky_relu-prelu-mix", lambda x, a: tf.prelu(tf.leaky_relu(x, 0.1), a) * x,
     lambda x, a: T.where(x > 0, x, a * 0.1 * x) * x, ((2, 4), "nz"), ((4,), "pos"))


def _th_lstm(forget_bias, kernel, bias, data, c, h):
    res = T.cat([data, h], 1) @ kernel + bias
    i, j, f, o = T.split(res, res.shape[1] // 4, 1)
    new_c = T.sigmoid(i) * T.tanh(j) + c * T.sigmoid(forget_bias + f)
    return th_cat([new_c, T.tanh(new_c) * T.sigmoid(o)])


case("nn/basic_lstm_cell",
     lambda k, b, d, c, h: fg_cat(tf.basic_lstm_cell(fc(np.array(1.0)), k, b, d, c, h)),
     lambda k, b, d, c, h: _th_lstm(1.0, k, b, d, c, h),
     ((4, 8), "real"), ((8,), "real"), ((1, 2), "real"), ((1, 2), "real"), ((1, 2), "real"))
case("image/resize_bilinear-half-pixel",
     lambda x: tf.image.resize_bilinear(x, [5, 3], half_pixel_centers=True),
     lambda x: F.interpolate(x.permute(0, 3, 1, 2), size=(5, 3), mode="bilinear",
                             align_corners=False).permute(0, 2, 3, 1), ((1, 3, 4, 2), "real"))
case("image/resize_bilinear-align-corners",
     lambda x: tf.image.resize_bilinear(x, [4, 5], align_corners=True),
     lambda x: F.interpolate(x.permute(0, 3, 1, 2), size=(4, 5), mode="bilinear",
                             align_corners=True).permute(0, 2, 3, 1), ((1, 3, 3, 1), "real"))
case("image/resize_nearest_neighbor",
     lambda x: tf.image.resize_nearest_neighbor(x, [5, 2]) ** 2,
     lambda x: F.interpolate(x.permute(0, 3, 1, 2), size=(5, 2), mode="nearest")
     .permute(0, 2, 3, 1) ** 2, ((1, 3, 4, 1), "real"))
case("image/resize_nearest_neighbor-half-pixel",
     lambda x: tf.image.resize_nearest_neighbor(x, [5, 7], half_pixel_centers=True) ** 2,
     lambda x: F.interpolate(x.permute(0, 3, 1, 2), size=(5, 7), mode="nearest-exact")
     .permute(0, 2, 3, 1) ** 2, ((1, 3, 4, 1), "real"))
case("image/flip_left_right", lambda x: tf.image.flip_left_right(x) * fc(np.arange(12.)
                                                                         .reshape(1, 2, 3, 2)),
     lambda x: x.flip(2) * tt(np.arange(12.).reshape(1, 2, 3, 2)), ((1, 2, 3, 2), "real"))
case("image/rgb_to_grayscale", lambda x: tf.image.rgb_to_grayscale(x).exp(),
     lambda x: (x @ tt(np.array([[0.2989], [0.5870], [0.1140]]))).exp(), ((2, 2, 3), "real"))

# ------------------------------------------------------------------------------ conv / pool


def _same_pads(sizes, ks, strides, dils):
    pads = []
    for n, k, s, d in zip(sizes, ks, strides, dils):
        out = -(-n // s)
        total = max((out - 1) * s + (k - 1) * d + 1 - n, 0)
        pads.append((total // 2, total - total // 2))
    return pads


def _th_pad_spatial(x, pads, value=0.0):
    """x channels-first; pads per spatial axis in order."""
    flat = []
    for b, a in reversed(pads):
        flat += [b, a]
    return F.pad(x, flat, value=value)


def _th_conv(x, w, strides, pad, dils=None, groups=1):
    """TF layout (channels last, filter [k..., in, out]) conv by torch."""
    nd = x.dim() - 2
    strides = [strides] * nd if isinstance(strides, int) else list(strides)
    dils = [1] * nd if dils is None else ([dils] * nd if isinstance(dils, int) else list(dils))
    xc = x.permute(0, nd + 1, *range(1, nd + 1))
    wc = w.permute(nd + 1, nd, *range(nd))
    if pad == "same":
        xc = _th_pad_spatial(xc, _same_pads(xc.shape[2:], wc.shape[2:], strides, dils))
    conv = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}[nd]
    y = conv(xc, wc, stride=strides, dilation=dils, groups=groups)
    return y.permute(0, *range(2, nd + 2), 1)


def _th_depthwise(x, w, strides, pad, dils=None):
    kh, kw, c, m = w.shape
    # grouped conv: out channel g*m + j uses filter[..., g, j]
    wg = w.reshape(kh, kw, 1, c * m)
    return _th_conv(x, wg, strides, pad, dils, groups=c)


def _th_conv_transpose(x, w, out_shape, strides, pad):
    """conv2d_transpose is the input-gradient of conv2d: torch autograd, kept differentiable."""
    z = T.zeros(out_shape, dtype=x.dtype, requires_grad=True)
    y = _th_conv(z, w, strides, pad)
    return T.autograd.grad(y, z, x, create_graph=True)[0]


for _pad in ["valid", "same"]:
    for _s, _d in [(1, 1), (2, 1), (1, 2)]:
        case(f"conv/conv2d[{_pad},s={_s},d={_d}]",
             (lambda p, s, d: lambda x, w: tf.conv2d(x, w, s, p, dilations=d))(_pad, _s, _d),
             (lambda p, s, d: lambda x, w: _th_conv(x, w, s, p, d))(_pad, _s, _d),
             ((1, 5, 4, 2), "real"), ((2, 2, 2, 3), "real"))
    case(f"conv/conv1d[{_pad}]", (lambda p: lambda x, w: tf.conv1d(x, w, 2, p))(_pad),
         (lambda p: lambda x, w: _th_conv(x, w, 2, p))(_pad),
         ((2, 5, 2), "real"), ((3, 2, 2), "real"))
    case(f"conv/conv3d[{_pad}]", (lambda p: lambda x, w: tf.conv3d(x, w, 1, p))(_pad),
         (lambda p: lambda x, w: _th_conv(x, w, 1, p))(_pad),
         ((1, 3, 3, 2, 1), "real"), ((2, 2, 1, 1, 2), "real"))
    case(f"conv/depthwise_conv2d[{_pad}]",
         (lambda p: lambda x, w: tf.depthwise_conv2d(x, w, 1, p))(_pad),
         (lambda p: lambda x, w: _th_depthwise(x, w, 1, p))(_pad),
         ((1, 3, 4, 2), "real"), ((2, 2, 2, 2), "real"))
    case(f"conv/separable_conv2d[{_pad}]",
         (lambda p: lambda x, dw, pw: tf.separable_conv2d(x, dw, pw, 1, p))(_pad),
         (lambda p: lambda x, dw, pw: _th_conv(_th_depthwise(x, dw, 1, p), pw, 1, "valid"))(
             _pad),
         ((1, 3, 3, 2), "real"), ((2, 2, 2, 1), "real"), ((1, 1, 2, 2), "real"))
case("conv/conv2d_transpose[valid,s=2]",
     lambda x, w: tf.conv2d_transpose(x, w, [1, 5, 5, 2], 2, "valid"),
     lambda x, w: _th_conv_transpose(x, w, (1, 5, 5, 2), 2, "valid"),
     ((1, 2, 2, 3), "real"), ((3, 3, 2, 3), "real"))
case("conv/conv2d_transpose[same,s=2]",
     lambda x, w: tf.conv2d_transpose(x, w, [1, 4, 4, 1], 2, "same"),
     lambda x, w: _th_conv_transpose(x, w, (1, 4, 4, 1), 2, "same"),
     ((1, 2, 2, 2), "real"), ((2, 2, 1, 2), "real"))


def _th_pool(x, k, s, pad, kind):
    nd = x.dim() - 2
    k = [k] * nd if isinstance(k, int) else list(k)
    s = [s] * nd if isinstance(s, int) else list(s)
    xc = x.permute(0, nd + 1, *range(1, nd + 1))
    pads = _same_pads(xc.shape[2:], k, s, [1] * nd) if pad == "same" else [(0, 0)] * nd
    if kind == "max":
        pool = {2: F.max_pool2d, 3: F.max_pool3d}[nd]
        y = pool(_th_pad_spatial(xc, pads, -math.inf), k, s)
    else:
        pool = {2: F.avg_pool2d, 3: F.avg_pool3d}[nd]
        total = pool(_th_pad_spatial(xc, pads), k, s)
        count = pool(_th_pad_spatial(T.ones_like(xc), pads), k, s)
        y = total / count     # TF averages the cells inside the input only
    return y.permute(0, *range(2, nd + 2), 1)


for _kind, _fn, _fn3 in [("max", tf.max_pool, tf.max_pool3d), ("avg", tf.avg_pool, tf.avg_pool3d)]:
    for _pad, _k, _s in [("valid", 2, 2), ("same", 3, 2), ("valid", 2, 1), ("same", 2, 1)]:
        case(f"pool/{_kind}_pool[{_pad},k={_k},s={_s}]",
             (lambda f, p, k, s: lambda x: f(x, k, s, p))(_fn, _pad, _k, _s),
             (lambda kd, p, k, s: lambda x: _th_pool(x, k, s, p, kd))(_kind, _pad, _k, _s),
             ((1, 5, 4, 2), "real"))
    case(f"pool/{_kind}_pool3d[same]", (lambda f: lambda x: f(x, 2, 2, "same"))(_fn3),
         (lambda kd: lambda x: _th_pool(x, 2, 2, "same", kd))(_kind), ((1, 3, 3, 2, 1), "real"))

# ------------------------------------------------------------------------------ losses

L = tf.losses
R = tf.losses.Reduction
_w_const = np.array([[1.0, 0.0, 2.0], [0.5, 0.0, 1.0]])


def _th_reduce(l, w, red):
    if w is None:
        if red == R.NONE:
            return l
        return l.sum() if red == R.SUM else l.mean()
    lw = l * w
    if red == R.NONE:
        return lw
    if red == R.SUM:
        return lw.sum()
    wb = w.expand(l.shape) if isinstance(w, T.Tensor) else w
    if red == R.MEAN:
        return lw.sum() / wb.sum()
    return lw.sum() / (wb != 0).sum()


_LOSSES = [
    # name, flowgrad (labels, preds, **kw), torch elementwise loss (labels, preds), domains
    ("absolute_difference", L.absolute_difference, lambda y, p: (y - p).abs(), "real", "real"),
    ("mean_squared_error", L.mean_squared_error, lambda y, p: (y - p) ** 2, "real", "real"),
    ("huber_loss", lambda y, p, **kw: L.huber_loss(y, p, delta=0.7, **kw),
     lambda y, p: T.where((p - y).abs() <= 0.7, 0.5 * (p - y) ** 2,
                          0.7 * ((p - y).abs() - 0.35)), "real", "real"),
    ("log_loss", L.log_loss,
     lambda y, p: -(y * T.log(p + 1e-7)) - (1 - y) * T.log(1 - p + 1e-7), "prob", "prob"),
    ("sigmoid_cross_entropy", L.sigmoid_cross_entropy,
     lambda z, x: th_softplus(x) - x * z, "prob", "real"),
    ("sigmoid_cross_entropy-smoothing",
     lambda z, x, **kw: L.sigmoid_cross_entropy(z, x, label_smoothing=0.2, **kw),
     lambda z, x: th_softplus(x) - x * (z * 0.8 + 0.1), "prob", "real"),
]
for _n, _f, _t, _dy, _dp in _LOSSES:
    for _red in [R.SUM_BY_NONZERO_WEIGHTS, R.MEAN, R.SUM, R.NONE]:
        for _wname, _w in [("none", None), ("const", _w_const)]:
            case(f"losses/{_n}[{_red.name},w={_wname}]",
                 (lambda f, red, w: lambda y, p: f(y, p, weights=None if w is None else fc(w),
                                                   reduction=red))(_f, _red, _w),
                 (lambda t, red, w: lambda y, p: _th_reduce(t(y, p), None if w is None
                                                            else tt(w), red))(_t, _red, _w),
                 ((2, 3), _dy), ((2, 3), _dp))
    case(f"losses/{_n}[weights-differentiated]",
         (lambda f: lambda y, p, w: f(y, p, weights=w))(_f),
         (lambda t: lambda y, p, w: _th_reduce(t(y, p), w, R.SUM_BY_NONZERO_WEIGHTS))(_t),
         ((2, 3), _dy), ((2, 3), _dp), ((2, 1), "pos"))
_hinge_y = (_C.random((2, 3)) > 0.5).astype(float)
case("losses/hinge_loss", lambda p: L.hinge_loss(fc(_hinge_y), p),
     lambda p: T.relu(1 - (tt(_hinge_y) * 2 - 1) * p).mean(), ((2, 3), "real"))
case("losses/cosine_distance", lambda y, p: L.cosine_distance(y, p, 1, reduction=R.SUM),
     lambda y, p: (1 - (y * p).sum(1, keepdim=True)).sum(), ((2, 3), "real"), ((2, 3), "real"))
_onehot = np.eye(4)[[1, 3, 0]]
case("losses/softmax_cross_entropy[onehot]",
     lambda x: L.softmax_cross_entropy(fc(_onehot), x),
     lambda x: -(tt(_onehot) * T.log_softmax(x, -1)).sum(-1).mean(), ((3, 4), "real"))
case("losses/softmax_cross_entropy[soft-labels,smoothing,weights]",
     lambda y, x: L.softmax_cross_entropy(y, x, fc(np.array([1.0, 0.0, 3.0])), 0.1),
     lambda y, x: _th_reduce(-((y * 0.9 + 0.1 / 4) * T.log_softmax(x, -1)).sum(-1),
                             tt(np.array([1.0, 0.0, 3.0])), R.SUM_BY_NONZERO_WEIGHTS),
     ((3, 4), "prob"), ((3, 4), "real"))

# ------------------------------------------------------------------------------ composites

case("composite/mlp", lambda x, w1, b1, w2: tf.mat_mul(tf.tanh(tf.mat_mul(x, w1) + b1), w2)
     .sigmoid(), lambda x, w1, b1, w2: T.sigmoid(T.tanh(x @ w1 + b1) @ w2),
     ((3, 4), "real"), ((4, 5), "real"), ((5,), "real"), ((5, 2), "real"), order=3)
case("composite/softmax-attention",
     lambda q, k, v: tf.mat_mul(tf.softmax(tf.mat_mul(q, k, False, True) / 2.0), v),
     lambda q, k, v: T.softmax(q @ k.T / 2.0, -1) @ v,
     ((3, 2), "real"), ((4, 2), "real"), ((4, 2), "real"))
case("composite/conv-relu-pool-dense",
     lambda x, w, d: tf.mat_mul(tf.reshape(tf.max_pool(tf.relu(tf.conv2d(x, w, 1, "same")),
                                                      2, 2, "valid"), [1, -1]), d),
     lambda x, w, d: _th_pool(T.relu(_th_conv(x, w, 1, "same")), 2, 2, "valid", "max")
     .reshape(1, -1) @ d,
     ((1, 4, 4, 1), "nz"), ((2, 2, 1, 2), "nz"), ((8, 2), "real"))


# ------------------------------------------------------------------------------ random programs
# An op of a program: (name, arity, applies(shapes) -> bool, out_shape(shapes, p), fg, th,
# params(rng, shapes), reject(values, p) -> bool or None). A program is redrawn where an
# op's input sits near a kink or tie, a denominator near zero, or values grow large: the
# oracle then compares roundoff, and flowgrad's conventions at kinks are TF.js's.

def _bshape(*shapes):
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        return None


def _unary(name, fg, th, kink=None):
    return (name, 1, lambda s: True, lambda s, p: s[0], lambda xs, p: fg(xs[0]),
            lambda xs, p: th(xs[0]), lambda r, s: None, kink)


def _binary(name, fg, th, kink=None):
    return (name, 2, lambda s: _bshape(*s) is not None and np.prod(_bshape(*s)) <= 24,
            lambda s, p: _bshape(*s), lambda xs, p: fg(*xs), lambda xs, p: th(*xs),
            lambda r, s: None, kink)


def _axis_param(r, s):
    return int(r.integers(len(s[0]))) if len(s[0]) else None


def _mind(a):
    a = np.abs(np.asarray(a, dtype=float))
    return a.min() if a.size else np.inf


def _near(a, eps=1e-3):
    """Some entry of a lies within eps of 0 (a kink or a tie)."""
    return _mind(a) < eps


PROGRAM_OPS = [
    _unary("sin", tf.sin, T and T.sin),
    _unary("cos", tf.cos, T and T.cos),
    _unary("tanh", tf.tanh, T and T.tanh),
    _unary("sigmoid", tf.sigmoid, T and T.sigmoid),
    _unary("softplus", tf.softplus, th_softplus),
    _unary("atan", tf.atan, T and T.atan),
    _unary("erf", tf.erf, T and T.erf),
    _unary("square", tf.square, T and T.square),
    _unary("exp", tf.exp, T and T.exp),
    _unary("neg", tf.neg, T and T.neg),
    _unary("asinh", tf.asinh, T and T.asinh),
    _unary("elu", tf.elu, F and F.elu, lambda v, p: _near(v[0])),
    _unary("relu", tf.relu, T and T.relu, lambda v, p: _near(v[0])),
    _unary("abs", tf.abs, T and T.abs, lambda v, p: _near(v[0])),
    _unary("log1p_sq", lambda x: tf.log1p(tf.square(x)), lambda x: T.log1p(x * x)),
    _unary("sqrt_sq1", lambda x: tf.sqrt(x * x + 1), lambda x: T.sqrt(x * x + 1)),
    _unary("scale", lambda x: x * 0.7 - 0.2, lambda x: x * 0.7 - 0.2),
    _binary("add", tf.add, T and T.add),
    _binary("sub", tf.sub, T and T.sub),
    _binary("mul", tf.mul, T and T.mul),
    _binary("div", tf.div, T and T.div, lambda v, p: _near(v[1], 0.3)),
    _binary("maximum", tf.maximum, T and T.maximum, lambda v, p: _near(np.subtract(*v))),
    _binary("minimum", tf.minimum, T and T.minimum, lambda v, p: _near(np.subtract(*v))),
    _binary("squared_difference", tf.squared_difference, lambda a, b: (a - b) ** 2),
    _binary("atan2", tf.atan2, T and T.atan2,
            lambda v, p: _near(np.hypot(*np.broadcast_arrays(*v)), 0.3)),
    ("sum", 1, lambda s: len(s[0]) > 0, lambda s, p: tuple(d for i, d in enumerate(s[0])
                                                           if i != p),
     lambda xs, p: tf.sum(xs[0], p), lambda xs, p: xs[0].sum(p), _axis_param, None),
    ("mean_keep", 1, lambda s: len(s[0]) > 0,
     lambda s, p: tuple(1 if i == p else d for i, d in enumerate(s[0])),
     lambda xs, p: tf.mean(xs[0], p, True), lambda xs, p: xs[0].mean(p, keepdim=True),
     _axis_param, None),
    ("max", 1, lambda s: len(s[0]) > 0 and s[0][-1] > 1, lambda s, p: s[0][:-1],
     lambda xs, p: tf.max(xs[0], -1), lambda xs, p: xs[0].amax(-1), lambda r, s: None,
     lambda v, p: _near(np.diff(np.sort(v[0], -1), axis=-1))),
    ("log_sum_exp", 1, lambda s: len(s[0]) > 0, lambda s, p: s[0][:-1],
     lambda xs, p: tf.log_sum_exp(xs[0], -1), lambda xs, p: T.logsumexp(xs[0], -1),
     lambda r, s: None, None),
    ("softmax", 1, lambda s: len(s[0]) > 0, lambda s, p: s[0],
     lambda xs, p: tf.softmax(xs[0]), lambda xs, p: T.softmax(xs[0], -1), lambda r, s: None,
     None),
    ("cumsum", 1, lambda s: len(s[0]) > 0, lambda s, p: s[0],
     lambda xs, p: tf.cumsum(xs[0], p), lambda xs, p: T.cumsum(xs[0], p), _axis_param, None),
    ("transpose", 1, lambda s: len(s[0]) == 2, lambda s, p: s[0][::-1],
     lambda xs, p: tf.transpose(xs[0]), lambda xs, p: xs[0].T, lambda r, s: None, None),
    ("flatten", 1, lambda s: len(s[0]) >= 2, lambda s, p: (int(np.prod(s[0])),),
     lambda xs, p: tf.reshape(xs[0], [-1]), lambda xs, p: xs[0].reshape(-1),
     lambda r, s: None, None),
    ("reverse", 1, lambda s: len(s[0]) > 0, lambda s, p: s[0],
     lambda xs, p: tf.reverse(xs[0], p), lambda xs, p: xs[0].flip(p), _axis_param, None),
    ("expand_tile", 1, lambda s: len(s[0]) == 1 and s[0][0] <= 4,
     lambda s, p: (2, s[0][0]), lambda xs, p: tf.tile(tf.expand_dims(xs[0], 0), [2, 1]),
     lambda xs, p: xs[0].unsqueeze(0).repeat(2, 1), lambda r, s: None, None),
    ("slice_first", 1, lambda s: len(s[0]) > 0 and s[0][0] > 1,
     lambda s, p: (s[0][0] - 1,) + tuple(s[0][1:]),
     lambda xs, p: tf.slice(xs[0], [1] + [0] * (len(xs[0].shape) - 1),
                            [-1] * len(xs[0].shape)),
     lambda xs, p: xs[0][1:], lambda r, s: None, None),
    ("concat0", 2, lambda s: len(s[0]) > 0 and len(s[0]) == len(s[1]) and s[0][1:] == s[1][1:]
     and s[0][0] + s[1][0] <= 8,
     lambda s, p: (s[0][0] + s[1][0],) + tuple(s[0][1:]),
     lambda xs, p: tf.concat(list(xs), 0), lambda xs, p: T.cat(list(xs), 0),
     lambda r, s: None, None),
    ("mat_mul", 2, lambda s: len(s[0]) == 2 and len(s[1]) == 2 and s[0][1] == s[1][0],
     lambda s, p: (s[0][0], s[1][1]), lambda xs, p: tf.mat_mul(*xs), lambda xs, p: xs[0] @ xs[1],
     lambda r, s: None, None),
    ("dot_t", 2, lambda s: len(s[0]) == 2 and len(s[1]) == 2 and s[0][1] == s[1][1],
     lambda s, p: (s[0][0], s[1][0]), lambda xs, p: tf.mat_mul(xs[0], xs[1], False, True),
     lambda xs, p: xs[0] @ xs[1].T, lambda r, s: None, None),
]
PROGRAM_OPS_BY_NAME = {op[0]: op for op in PROGRAM_OPS}
_INPUT_SHAPES = [(3, 4), (4,), (3, 1), (1, 4), (), (4, 3), (2, 3), (3,)]


def _run_program(prog, xs, lib):
    regs = list(xs)
    k = 4 if lib == "tf" else 5
    for name, args, p in prog:
        regs.append(PROGRAM_OPS_BY_NAME[name][k]([regs[a] for a in args], p))
    return regs[-1]


def random_program(seed, max_tries=200):
    """A seeded random program of 3-8 ops over 1-3 inputs: a Case. Deterministic."""
    rng = np.random.default_rng(seed)
    for _ in range(max_tries):
        n_in = int(rng.choice([1, 2, 2, 3, 3]))
        shapes = [_INPUT_SHAPES[int(rng.integers(len(_INPUT_SHAPES)))] for _ in range(n_in)]
        inputs = [(s, "real") for s in shapes]
        arrays = [rng.uniform(-2, 2, s) for s in shapes]
        vals = [np.asarray(a) for a in arrays]
        regs = list(shapes)
        prog = []
        n_ops = int(rng.integers(3, 9))
        ok = True
        for step in range(n_ops):
            # the newest register is an operand: the program is a chain with side inputs
            for _try in range(50):
                op = PROGRAM_OPS[int(rng.integers(len(PROGRAM_OPS)))]
                name, arity = op[0], op[1]
                unused = [i for i in range(n_in) if not any(i in a for _, a, _ in prog)
                          and i != len(regs) - 1]
                args = [len(regs) - 1] + [
                    unused[0] if unused and rng.random() < 0.7 else int(rng.integers(len(regs)))
                    for _ in range(arity - 1)]
                if arity == 2 and rng.random() < 0.5:
                    args = args[::-1]
                # x - x, x / x, max(x, x): exact zeros and ties, roundoff-only derivatives
                if arity == 2 and args[0] == args[1] and name not in ("add", "mul", "concat0",
                                                                      "mat_mul", "dot_t"):
                    continue
                s = [regs[a] for a in args]
                if op[2](s):
                    break
            else:
                ok = False
                break
            p = op[6](rng, s)
            reject = op[7]
            if reject is not None and reject([vals[a] for a in args], p):
                ok = False
                break
            with T.no_grad():
                v = op[5]([T.tensor(vals[a]) for a in args], p).numpy()
            if not np.all(np.isfinite(v)) or np.abs(v).max(initial=0) > 1e3 or v.size > 24:
                ok = False
                break
            out_shape = tuple(op[3](s, p))
            assert out_shape == v.shape, (name, s, out_shape, v.shape)
            prog.append((name, args, p))
            regs.append(out_shape)
            vals.append(v)
        if not ok:
            continue
        # every input must reach the output (an unused one only tests zeros)
        used = {len(regs) - 1}
        for i in range(len(prog) - 1, -1, -1):
            if n_in + i in used:
                used.update(prog[i][1])
        if not all(i in used for i in range(n_in)):
            continue
        text = "; ".join(f"r{n_in + i}={nm}({','.join(f'r{a}' for a in ar)}"
                         + (f",{p}" if p is not None else "") + ")"
                         for i, (nm, ar, p) in enumerate(prog))
        return Case(f"program/{seed}: {text}",
                    (lambda pr: lambda *xs: _run_program(pr, xs, "tf"))(prog),
                    (lambda pr: lambda *xs: _run_program(pr, xs, "th"))(prog), inputs,
                    fixed=[np.asarray(a, dtype=np.float64) for a in arrays])
    raise RuntimeError(f"no valid program for seed {seed}")
