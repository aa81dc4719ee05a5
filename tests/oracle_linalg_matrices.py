"""The oracle's rows for tf.linalg's matrices functions (see oracle_cases.py): each a flowgrad
function beside an independent torch one, joined to oracle_cases.CASES on import.

The inputs come from the "real" domain; each row makes its matrix well conditioned (x + 6I)
or symmetric positive definite (x·xᵀ + 3I) inside both functions, the same way."""
import pytest

# without torch (the test extra alone) pytest still collects this module for its doctests:
# skip it, as test_oracle.py skips, naming the extra
pytest.importorskip("torch", reason="the derivative oracle needs PyTorch, which the test "
                    "extra does not install: pip install -e '.[oracle]'")

import numpy as np
from oracle_cases import T, case, fc, fg_cat, th_cat, tt

import flowgrad as tf

L = tf.linalg


def fg_well(x, shift=6.0):
    return x + shift * fc(np.eye(x.shape[-1]))


def th_well(x, shift=6.0):
    return x + shift * tt(np.eye(x.shape[-1]))


def fg_spd(x):
    return tf.mat_mul(x, x, False, True) + 3 * fc(np.eye(x.shape[-2]))


def th_spd(x):
    return x @ x.transpose(-1, -2) + 3 * tt(np.eye(x.shape[-2]))


def th_tri(a, lower, adjoint=False, unit=False):
    """The triangle a triangular solve uses, from its definition."""
    t = T.tril(a) if lower else T.triu(a)
    if unit:
        n = a.shape[-1]
        t = t * (1 - tt(np.eye(n))) + tt(np.eye(n))
    return t.transpose(-1, -2) if adjoint else t


# ---------------------------------------------------------------- solves

for _sa, _sb in [((3, 3), (3, 2)), ((3, 3), (3,)), ((2, 1, 3, 3), (3, 3, 2)),
                 ((3, 3), (2, 3, 1))]:
    _tag = "x".join(map(str, _sa)) + "-" + "x".join(map(str, _sb))
    case(f"linalg/solve[{_tag}]", lambda a, b: L.solve(fg_well(a), b),
         lambda a, b: T.linalg.solve(th_well(a), b), (_sa, "real"), (_sb, "real"))



def _triangular_solve_row(lo, adj, unit, sa, sb):
    def fg(a, b):
        return L.triangular_solve(fg_well(a), b, lower=lo, adjoint=adj, unit_diagonal=unit)

    def th(a, b):
        return T.linalg.solve(th_tri(th_well(a), lo, adj, unit), b)

    case(f"linalg/triangular_solve[lower={lo},adjoint={adj},unit={unit}]", fg, th,
         (sa, "real"), (sb, "real"))


for _row in [(True, False, False, (3, 3), (3, 2)), (False, False, False, (3, 3), (3,)),
             (True, True, False, (2, 3, 3), (3, 2)), (False, True, True, (3, 3), (2, 3, 2))]:
    _triangular_solve_row(*_row)

# ---------------------------------------------------------------- inverse, determinants

for _s in [(3, 3), (2, 3, 3)]:
    _tag = "x".join(map(str, _s))
    case(f"linalg/inv[{_tag}]", lambda a: L.inv(fg_well(a)),
         lambda a: T.linalg.inv(th_well(a)), (_s, "real"))
    case(f"linalg/det[{_tag}]", lambda a: L.det(fg_well(a)),
         lambda a: T.linalg.det(th_well(a)), (_s, "real"))
    # a negative determinant (an odd number of negative eigenvalues)
    case(f"linalg/slogdet[{_tag}]", lambda a: fg_cat(L.slogdet(fg_well(a, -6))),
         lambda a: th_cat(T.linalg.slogdet(th_well(a, -6))), (_s, "real"))
case("linalg/det-raw", L.det, T.linalg.det, ((2, 2), "real"), order=3)
case("linalg/logdet-chain", lambda a: L.slogdet(fg_spd(a)).logabsdet.sum() * 0.5,
     lambda a: T.linalg.slogdet(th_spd(a))[1].sum() * 0.5, ((3, 4), "real"))

# ---------------------------------------------------------------- Cholesky

case("linalg/cholesky[3x3]", lambda a: L.cholesky(fg_spd(a)),
     lambda a: T.linalg.cholesky(th_spd(a)), ((3, 3), "real"))
case("linalg/cholesky[2x3x2]", lambda a: L.cholesky(fg_spd(a)),
     lambda a: T.linalg.cholesky(th_spd(a)), ((2, 3, 2), "real"))
# a Gaussian negative log-likelihood by its Cholesky factor, as one writes it


def _fg_nll(a, y):
    l = L.cholesky(fg_spd(a))
    return 0.5 * L.triangular_solve(l, y).square().sum() + tf.log(L.trace(
        L.tril(L.triu(l)).log1p())).sum()


def _th_nll(a, y):
    l = T.linalg.cholesky(th_spd(a))
    z = T.linalg.solve_triangular(l, y[:, None], upper=False)
    return 0.5 * z.square().sum() + T.log(T.diagonal(l).log1p().sum())


case("linalg/cholesky-gaussian-nll", _fg_nll, _th_nll, ((3, 3), "real"), ((3,), "real"))

# ---------------------------------------------------------------- powers, trace, triangles



def _structural_rows(k):
    case(f"linalg/tril[k={k}]", lambda x: L.tril(x, k).exp(), lambda x: T.tril(x, k).exp(),
         ((2, 3, 4), "real"))
    case(f"linalg/triu[k={k}]", lambda x: L.triu(x, k).exp(), lambda x: T.triu(x, k).exp(),
         ((4, 3), "real"))


def _power_row(n):
    case(f"linalg/matrix_power[n={n}]", lambda a: L.matrix_power(fg_well(a) / 6, n),
         lambda a: T.linalg.matrix_power(th_well(a) / 6, n), ((3, 3), "real"))


def _trace_row(k, shape):
    case(f"linalg/trace[offset={k}]", lambda x: L.trace(x, k).square(),
         lambda x: T.diagonal(x, k, -2, -1).sum(-1).square(), (shape, "real"))


for _n in (3, 4, -2):
    _power_row(_n)
case("linalg/matrix_power[batch]", lambda a: L.matrix_power(a, 2),
     lambda a: T.linalg.matrix_power(a, 2), ((2, 2, 2), "real"), order=3)
for _off, _s in [(0, (3, 3)), (1, (2, 3, 4)), (-1, (4, 3))]:
    _trace_row(_off, _s)
for _k in (0, -1, 2):
    _structural_rows(_k)

# ---------------------------------------------------------------- QR, the shapes beyond square

def _fg_qr_pos(a, full=False):
    """q and r of a (a batch too) made unique: r's diagonal positive; with a complete q of
    a tall a, q's first n columns and r's first n rows (the part that is a function of a)."""
    m, n = a.shape[-2:]
    k = min(m, n)
    q, r = L.qr(a, full)
    q, r = q[..., :, :k], r[..., :k, :]
    d = tf.sign((r[..., :, :k] * fc(np.eye(k))).sum(-1))
    return fg_cat([q * tf.expand_dims(d, -2), r * tf.expand_dims(d, -1)])


def _th_qr_pos(a):
    q, r = T.linalg.qr(a)
    d = T.sign(T.diagonal(r, 0, -2, -1))
    return th_cat([q * d[..., None, :], r * d[..., :, None]])


case("linalg/qr-wide[2x4]", _fg_qr_pos, _th_qr_pos, ((2, 4), "real"))
case("linalg/qr-wide[2x3]", _fg_qr_pos, _th_qr_pos, ((2, 3), "real"))
case("linalg/qr-batched", _fg_qr_pos, _th_qr_pos, ((2, 4, 3), "real"))
case("linalg/qr-complete-tall", lambda a: _fg_qr_pos(a, True), _th_qr_pos, ((4, 2), "real"))
