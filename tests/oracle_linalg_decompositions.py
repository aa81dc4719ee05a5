"""The oracle's rows for tf.linalg's decompositions functions (see oracle_cases.py): each a flowgrad
function beside an independent torch one, joined to oracle_cases.CASES on import.

Eigen- and singular vectors are unique only up to sign, so the rows compare quantities that
do not depend on the signs: the squared entries of each vector, and reconstructions
V diag(g(w)) V^T or U diag(g(s)) Vh. Symmetric inputs are built inside both functions
(a + a^T) the same way. Random inputs have distinct eigen- and singular values."""
import pytest

# without torch (the test extra alone) pytest still collects this module for its doctests:
# skip it, as test_oracle.py skips, naming the extra
pytest.importorskip("torch", reason="the derivative oracle needs PyTorch, which the test "
                    "extra does not install: pip install -e '.[oracle]'")

from oracle_cases import T, case, fc, fg_cat, th_cat, tt  # noqa: F401

import flowgrad as tf

_INF = float("inf")


def _fg_sym(a):
    return a + tf.transpose(a, list(range(a.rank - 2)) + [a.rank - 1, a.rank - 2])


def _th_sym(a):
    return a + a.transpose(-1, -2)


# ---------------------------------------------------------------- eigh, eigvalsh

def _fg_eigh(uplo):
    def f(a):
        w, v = tf.linalg.eigh(_fg_sym(a), uplo)
        rec = tf.mat_mul(v * w.sin().expand_dims(-2), v, False, True)
        return fg_cat([w, v * v, rec])
    return f


def _th_eigh(uplo):
    def f(a):
        w, v = T.linalg.eigh(_th_sym(a), UPLO=uplo)
        rec = (v * w.sin().unsqueeze(-2)) @ v.transpose(-1, -2)
        return th_cat([w, v * v, rec])
    return f


for _uplo in ("L", "U"):
    case(f"linalg/eigh[{_uplo}]", _fg_eigh(_uplo), _th_eigh(_uplo), ((3, 3), "real"))
case("linalg/eigh-batched", _fg_eigh("L"), _th_eigh("L"), ((2, 3, 3), "real"))
# a triangle alone: eigh reads only it, so the other triangle has gradient zero
case("linalg/eigh-triangle", lambda a: tf.linalg.eigh(a).eigenvalues.square(),
     lambda a: T.linalg.eigvalsh(T.tril(a) + T.tril(a, -1).transpose(-1, -2)).square(),
     ((3, 3), "real"))
case("linalg/eigvalsh", lambda a: tf.linalg.eigvalsh(_fg_sym(a)).exp(),
     lambda a: T.linalg.eigvalsh(_th_sym(a)).exp(), ((2, 4, 4), "real"))


# ---------------------------------------------------------------- svd, svdvals

def _fg_svd(full):
    def f(a):
        u, s, vh = tf.linalg.svd(a, full_matrices=full)
        k = s.shape[-1]
        u, vh = u[..., :, :k], vh[..., :k, :]
        rec = tf.mat_mul(u * s.sin().expand_dims(-2), vh)
        return fg_cat([s, u * u, vh * vh, rec])
    return f


def _th_svd(full):
    def f(a):
        u, s, vh = T.linalg.svd(a, full_matrices=full)
        k = s.shape[-1]
        u, vh = u[..., :, :k], vh[..., :k, :]
        rec = (u * s.sin().unsqueeze(-2)) @ vh
        return th_cat([s, u * u, vh * vh, rec])
    return f


for _shape in [(3, 3), (4, 3), (3, 4), (2, 4, 3), (2, 2, 3)]:
    case(f"linalg/svd{list(_shape)}", _fg_svd(False), _th_svd(False), (_shape, "real"))
case("linalg/svd-full[4,2]", _fg_svd(True), _th_svd(True), ((4, 2), "real"))
case("linalg/svd-full[2,4]", _fg_svd(True), _th_svd(True), ((2, 4), "real"))
case("linalg/svdvals", lambda a: tf.linalg.svdvals(a).square(),
     lambda a: T.linalg.svdvals(a).square(), ((2, 3, 4), "real"))


# ---------------------------------------------------------------- pinv, lstsq

for _shape in [(3, 3), (4, 2), (2, 4), (2, 3, 2)]:
    case(f"linalg/pinv{list(_shape)}", lambda a: tf.linalg.pinv(a),
         lambda a: T.linalg.pinv(a), (_shape, "real"))


def _th_lstsq(a, b):
    # the normal equations (a has full column rank): independent of the SVD route
    at = a.transpose(-1, -2)
    x = T.linalg.solve(at @ a, at @ b)
    e = a @ x - b
    return th_cat([x, (e * e).sum(-2)])


def _fg_lstsq(a, b):
    x, res, _, _ = tf.linalg.lstsq(a, b)
    return fg_cat([x, res])


case("linalg/lstsq", _fg_lstsq, _th_lstsq, ((5, 3), "real"), ((5, 2), "real"))
case("linalg/lstsq-batched", _fg_lstsq, _th_lstsq, ((2, 4, 2), "real"), ((2, 4, 1), "real"))
case("linalg/lstsq-wide", lambda a, b: tf.linalg.lstsq(a, b).x,
     lambda a, b: T.linalg.pinv(a) @ b, ((2, 3), "real"), ((2, 2), "real"))


# ---------------------------------------------------------------- norm

def _norms(o, axis):
    fg = lambda x: tf.linalg.norm(x, o, axis=axis)
    if isinstance(axis, int):
        return fg, lambda x: T.linalg.vector_norm(x, 2 if o is None else o, dim=axis)
    return fg, lambda x: T.linalg.matrix_norm(x, o, dim=axis)


for _ord in [None, 1, 3, 4, 0.5, -1, -2, _INF, -_INF]:
    case(f"linalg/norm-vector[{_ord}]", *_norms(_ord, -1), ((3, 4), "nz"))
for _ord in ["fro", "nuc", 2, -2, 1, -1, _INF, -_INF]:
    case(f"linalg/norm-matrix[{_ord}]", *_norms(_ord, (1, 2)), ((2, 3, 4), "nz"))
case("linalg/norm-matrix-axes[2,0]", lambda x: tf.linalg.norm(x, "nuc", axis=(2, 0)),
     lambda x: T.linalg.matrix_norm(x, "nuc", dim=(2, 0)), ((3, 2, 4), "real"))
case("linalg/norm-flat", lambda x: tf.linalg.norm(x), lambda x: T.linalg.norm(x.reshape(-1)),
     ((2, 3, 2), "real"))
