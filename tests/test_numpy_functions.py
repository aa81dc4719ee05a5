"""NumPy's functions called on flowgrad tensors (issue 31), table-driven: each row is one
NumPy call with its argument forms. The same call on NumPy arrays and on float64 tensors
gives the same values; the gradient of a fixed random projection of the output (sum of
output * W) matches central differences of the NumPy call, and its second order matches
central differences of flowgrad's first (opcheck.lift); float32 stays float32."""
import warnings
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pytest
from opcheck import analytic_grad, central_differences, lift, numeric_grad
from test_numpy_interop import CASES

import flowgrad as tf
from flowgrad import numpy_interop as NI
from flowgrad.errors import ArgumentError, GradientError, ShapeError
from flowgrad.ops._core import NAMESPACES


@dataclass
class Row:
    id: str
    func: Callable            # the NumPy function the row covers
    call: Callable            # arrays (or tensors) -> output(s)
    inputs: list              # shapes (standard normal entries) or fixed arrays
    order: int = 2            # highest derivative order checked
    kw: dict = field(default_factory=dict)

    def __repr__(self):
        return self.id


def R(id, func, call, *inputs, order=2):
    return Row(id, func, call, list(inputs), order)


def fixed(*v):
    return np.array(v, dtype=np.float64)


COORDS = fixed(0.0, 0.4, 1.1, 1.5, 2.6)
TIES = fixed(0.5, -1.0, 2.0, 0.0)            # logaddexp's kink-free ties
SINC_AT = fixed(0.0, 0.01, -0.02, 0.03, 0.5, -1.25, 2.2)
P3 = (2, 3, 4)

ROWS = [
    # cross: 3- and 2-vectors, their axis forms
    R("cross-3x3", np.cross, np.cross, (4, 3), (4, 3)),
    R("cross-2x3", np.cross, np.cross, (4, 2), (1, 3)),
    R("cross-3x2", np.cross, np.cross, (3,), (4, 2)),
    R("cross-2x2", np.cross, np.cross, (4, 2), (4, 2)),
    R("cross-axisa-axisb-axisc", np.cross,
      lambda a, b: np.cross(a, b, axisa=0, axisb=1, axisc=0), (3, 4), (4, 3)),
    R("cross-axis", np.cross, lambda a, b: np.cross(a, b, axis=1), (2, 3, 2), (2, 3, 2)),
    # kron
    R("kron-2d", np.kron, np.kron, (2, 3), (2, 2)),
    R("kron-ranks", np.kron, np.kron, (3,), (2, 1, 2)),
    R("kron-scalar", np.kron, np.kron, (), (2, 3)),
    # repeat
    R("repeat-int", np.repeat, lambda a: np.repeat(a, 2), (2, 3)),
    R("repeat-per-element", np.repeat, lambda a: np.repeat(a, [1, 0, 3], axis=1), (2, 3)),
    R("repeat-axis0", np.repeat, lambda a: np.repeat(a, [2], axis=-2), (2, 3)),
    # gradient
    R("gradient-2d", np.gradient, np.gradient, (4, 5)),
    R("gradient-spacing-axis-edge2", np.gradient,
      lambda f: np.gradient(f, 0.5, axis=1, edge_order=2), (3, 5)),
    R("gradient-coordinates-edge2", np.gradient,
      lambda f, x: np.gradient(f, x, edge_order=2), (5,), COORDS),
    R("gradient-coordinates-edge1", np.gradient, lambda f: np.gradient(f, COORDS), (5,)),
    R("gradient-per-axis", np.gradient, lambda f: np.gradient(f, COORDS, 2.0), (5, 3)),
    R("gradient-axes-tuple", np.gradient, lambda f: np.gradient(f, axis=(-1, 0)), P3),
    R("gradient-two-points", np.gradient, np.gradient, (2,)),
    # logaddexp, logaddexp2 (ufuncs)
    R("logaddexp", np.logaddexp, np.logaddexp, (2, 3), (3,)),
    R("logaddexp-ties", np.logaddexp, np.logaddexp, TIES, TIES),
    R("logaddexp-far", np.logaddexp, np.logaddexp, fixed(30.0, -40.0), fixed(-5.0, 1.0)),
    R("logaddexp2", np.logaddexp2, np.logaddexp2, (2, 3), (2, 3)),
    R("logaddexp2-ties", np.logaddexp2, np.logaddexp2, TIES, TIES),
    # trace, diagonal, diag
    R("trace", np.trace, np.trace, (3, 4)),
    R("trace-offset-axes", np.trace, lambda a: np.trace(a, 1, 2, 0), P3),
    R("trace-negative-offset", np.trace, lambda a: np.trace(a, offset=-1), (3, 3)),
    R("diagonal", np.diagonal, lambda a: np.diagonal(a, -1, 2, 0), P3),
    R("diagonal-offset-past-end", np.diagonal, lambda a: np.diagonal(a, 4), (2, 3)),
    R("diag-vector-k", np.diag, lambda v: np.diag(v, -2), (3,)),
    R("diag-vector", np.diag, np.diag, (3,)),
    R("diag-matrix-k", np.diag, lambda a: np.diag(a, 1), (3, 4)),
    # splitting (lists of outputs)
    R("array_split-uneven", np.array_split, lambda a: np.array_split(a, 3, axis=1), (2, 7)),
    R("array_split-indices", np.array_split, lambda a: np.array_split(a, [1, -2]), (5,)),
    R("split-int", np.split, lambda a: np.split(a, 2, axis=-1), (3, 4)),
    R("split-indices-past-end", np.split, lambda a: np.split(a, [1, 5, 9]), (7,)),
    R("hsplit", np.hsplit, lambda a: np.hsplit(a, 3), (2, 3)),
    R("hsplit-vector", np.hsplit, lambda a: np.hsplit(a, [2]), (5,)),
    R("vsplit", np.vsplit, lambda a: np.vsplit(a, [1]), (3, 2)),
    R("dsplit", np.dsplit, lambda a: np.dsplit(a, 2), (2, 2, 4)),
    # diff
    R("diff", np.diff, np.diff, (2, 4)),
    R("diff-n-axis-prepend-append", np.diff,
      lambda a: np.diff(a, 2, axis=0, prepend=0.5, append=[[1.0, 2.0, 3.0, 4.0]]), (2, 4)),
    R("diff-n0", np.diff, lambda a: np.diff(a, 0), (3,)),
    # triangles
    R("tril", np.tril, lambda a: np.tril(a, -1), P3),
    R("triu", np.triu, lambda a: np.triu(a, 1), (3, 4)),
    R("triu-vector", np.triu, np.triu, (3,)),
    # joining
    R("vstack", np.vstack, lambda a, b: np.vstack([a, b]), (3,), (2, 3)),
    R("hstack", np.hstack, lambda a, b: np.hstack((a, b)), (2, 3), (2, 1)),
    R("hstack-vectors", np.hstack, lambda a, b: np.hstack([a, b]), (3,), (2,)),
    R("dstack", np.dstack, lambda a, b: np.dstack([a, b]), (2, 3), (2, 3)),
    R("column_stack", np.column_stack, lambda a, b: np.column_stack([a, b]), (3,), (3, 2)),
    *([R("row_stack", np.row_stack, lambda a, b: np.row_stack([a, b]), (2, 3), (3,))]
      if hasattr(np, "row_stack") else []),
    R("append", np.append, np.append, (2, 3), (4,)),
    R("append-axis", np.append, lambda a, b: np.append(a, b, axis=1), (2, 3), (2, 1)),
    # axes
    R("moveaxis", np.moveaxis, lambda a: np.moveaxis(a, 0, -1), P3),
    R("moveaxis-several", np.moveaxis, lambda a: np.moveaxis(a, [0, 1], [-1, 0]), P3),
    R("swapaxes", np.swapaxes, lambda a: np.swapaxes(a, 0, 2), P3),
    R("rollaxis", np.rollaxis, lambda a: np.rollaxis(a, 2), P3),
    R("rollaxis-start", np.rollaxis, lambda a: np.rollaxis(a, 0, 2), P3),
    R("atleast_1d", np.atleast_1d, np.atleast_1d, ()),
    R("atleast_2d", np.atleast_2d, np.atleast_2d, (3,)),
    R("atleast_3d-several", np.atleast_3d, np.atleast_3d, (3,), (2, 3)),
    # fmax, fmin (ufuncs; NaN cases in their own test)
    R("fmax", np.fmax, np.fmax, (2, 3), (3,)),
    R("fmin", np.fmin, np.fmin, (2, 3), (2, 3)),
    # linspace: tensor start and stop
    R("linspace", np.linspace, lambda a, b: np.linspace(a, b, 5), (), ()),
    R("linspace-arrays-axis-no-endpoint", np.linspace,
      lambda a, b: np.linspace(a, b, 4, endpoint=False, axis=1), (2, 3), (3,)),
    R("linspace-retstep-axis-last", np.linspace,
      lambda a, b: np.linspace(a, b, num=3, retstep=True, axis=-1), (2,), (2,)),
    R("linspace-one", np.linspace, lambda a, b: np.linspace(a, b, 1), (), ()),
    # pad
    R("pad-constant", np.pad, lambda a: np.pad(a, 1), (2, 3)),
    R("pad-constant-values", np.pad,
      lambda a: np.pad(a, ((1, 2), (0, 1)), constant_values=((1.5, 2.0), (3.0, -4.0))),
      (2, 3)),
    R("pad-reflect", np.pad, lambda a: np.pad(a, ((4, 2), (3, 5)), mode="reflect"), (2, 3)),
    R("pad-symmetric", np.pad, lambda a: np.pad(a, (2, 4), mode="symmetric"), (3, 2)),
    R("pad-edge", np.pad, lambda a: np.pad(a, [(1, 0), (2, 3)], mode="edge"), (2, 3)),
    R("pad-wrap", np.pad, lambda a: np.pad(a, 4, mode="wrap"), (3,)),
    # sorting
    R("sort", np.sort, np.sort, (3, 4)),
    R("sort-axis0", np.sort, lambda a: np.sort(a, axis=0), (3, 4)),
    R("sort-axis-none", np.sort, lambda a: np.sort(a, axis=None, kind="stable"), (3, 4)),
    R("partition", np.partition, lambda a: np.partition(a, 2), (2, 5)),
    R("partition-axis", np.partition, lambda a: np.partition(a, [0, 1], axis=0), (3, 2)),
    # select, flips, rotations
    R("select", np.select,
      lambda a, b: np.select([a > 0.5, b < 0], [a, b * 2], default=-0.25), (2, 3), (2, 3)),
    R("flipud", np.flipud, np.flipud, (3, 2)),
    R("fliplr", np.fliplr, np.fliplr, (3, 2)),
    R("rot90", np.rot90, np.rot90, (2, 3)),
    R("rot90-k2", np.rot90, lambda a: np.rot90(a, 2), (2, 3)),
    R("rot90-k3-axes", np.rot90, lambda a: np.rot90(a, -1, axes=(2, 0)), P3),
    # nan_to_num, sinc, angles
    R("nan_to_num", np.nan_to_num, lambda a: np.nan_to_num(a, nan=1.0, posinf=2.0), (2, 3)),
    R("sinc", np.sinc, np.sinc, SINC_AT),
    R("median-flat-even", np.median, np.median, (2, 3)),
    R("median-axis-odd-keepdims", np.median,
      lambda a: np.median(a, axis=1, keepdims=True), (2, 5)),
    R("median-axis0", np.median, lambda a: np.median(a, axis=-2), (4, 3)),
    # the complex accessors, on real data
    R("real", np.real, np.real, (2, 3)),
    R("real_if_close", np.real_if_close, np.real_if_close, (3,)),
    R("imag", np.imag, lambda x: np.imag(x) + x, (3,)),
    R("angle", np.angle, lambda x: np.angle(x) + np.angle(x, deg=True) + x, (4,)),
    R("deg2rad", np.deg2rad, np.deg2rad, (3,)),
    R("rad2deg", np.rad2deg, np.rad2deg, (3,)),
    R("radians", np.radians, np.radians, (3,)),
    R("degrees", np.degrees, np.degrees, (3,)),
    # take, roll
    R("take", np.take, lambda a: np.take(a, [[0, -1], [1, 1]], axis=1), (2, 3)),
    R("take-flat-wrap", np.take, lambda a: np.take(a, [7, -8], mode="wrap"), (2, 3)),
    R("roll", np.roll, lambda a: np.roll(a, (1, -2), (0, 1)), (2, 3)),
    R("roll-flat", np.roll, lambda a: np.roll(a, 4), (2, 3)),
    # einsum's operand/sublist form
    R("einsum-sublists", np.einsum, lambda a, b: np.einsum(a, [0, 1], b, [1, 2], [0, 2]),
      (2, 3), (3, 4)),
    R("einsum-sublists-implicit", np.einsum, lambda a, b: np.einsum(a, [27, 1], b, [27, 0]),
      (2, 3), (2, 4)),
    R("einsum-sublists-ellipsis", np.einsum,
      lambda a, b: np.einsum(a, [Ellipsis, 1], b, [1, 2], [Ellipsis, 2]), (5, 2, 3), (3, 4)),
    R("einsum-string", np.einsum, lambda a, b: np.einsum("ij,jk", a, b), (2, 3), (3, 4)),
    # products with a scalar or 3-D operand
    R("dot-scalar-3d", np.dot, np.dot, (), P3),
    R("dot-3d-vector", np.dot, np.dot, P3, (4,)),
    R("dot-vector-3d", np.dot, np.dot, (3,), (2, 3, 4)),
    R("matmul-1d-3d", np.matmul, np.matmul, (3,), (5, 3, 4)),
    R("matmul-3d-1d", np.matmul, np.matmul, (5, 3, 4), (4,)),
    # np.linalg that needs no decomposition
    R("linalg.norm", np.linalg.norm, np.linalg.norm, (2, 3)),
    R("linalg.norm-vector-2", np.linalg.norm, lambda a: np.linalg.norm(a, 2, axis=1), (2, 3)),
    R("linalg.norm-fro-axes", np.linalg.norm,
      lambda a: np.linalg.norm(a, "fro", axis=(0, 2), keepdims=True), P3),
    R("linalg.vector_norm", np.linalg.vector_norm,
      lambda a: np.linalg.vector_norm(a, axis=(0, 2), keepdims=True), P3),
    R("linalg.matrix_norm", np.linalg.matrix_norm, np.linalg.matrix_norm, P3),
    R("linalg.trace", np.linalg.trace, lambda a: np.linalg.trace(a, offset=1), P3),
    R("linalg.diagonal", np.linalg.diagonal, lambda a: np.linalg.diagonal(a, offset=-1), P3),
    R("linalg.matrix_transpose", np.linalg.matrix_transpose, np.linalg.matrix_transpose, P3),
    R("linalg.outer", np.linalg.outer, np.linalg.outer, (3,), (2,)),
    R("linalg.cross", np.linalg.cross, np.linalg.cross, (2, 3), (3,)),
    R("linalg.vecdot", np.linalg.vecdot, np.linalg.vecdot, (2, 3), (3,)),
    R("linalg.matmul", np.linalg.matmul, np.linalg.matmul, (2, 3), (3, 2)),
    R("linalg.tensordot", np.linalg.tensordot,
      lambda a, b: np.linalg.tensordot(a, b, axes=1), (2, 3), (3, 2)),
    R("linalg.multi_dot", np.linalg.multi_dot,
      lambda a, b, c: np.linalg.multi_dot([a, b, c]), (3,), (3, 4), (4, 2)),
]


def _spd(n, seed):
    a = np.random.default_rng(seed).standard_normal((n, n))
    return a @ a.T + n * np.eye(n)


def _well(shape, seed):
    a = np.random.default_rng(seed).standard_normal(shape)
    return a + 3 * np.eye(*shape[-2:])


def _sym(a):
    # NOTE: NumPy's cholesky and eigh read one triangle; tf.linalg's gradients are those of
    # the symmetric matrix (as PyTorch's). Differentiating through a symmetrized input makes
    # both conventions one function.
    return (a + np.swapaxes(a, -1, -2)) / 2


# np.linalg -> tf.linalg (helpers A and B write those): sign-free projections of vectors
LINALG_ROWS = [
    R("linalg.solve", np.linalg.solve, np.linalg.solve, _well((3, 3), 1), (3, 2)),
    R("linalg.inv", np.linalg.inv, np.linalg.inv, _well((2, 3, 3), 2)),
    R("linalg.det", np.linalg.det, np.linalg.det, _well((3, 3), 3)),
    R("linalg.slogdet", np.linalg.slogdet, lambda a: np.linalg.slogdet(a)[1], _well((3, 3), 4)),
    R("linalg.cholesky", np.linalg.cholesky, lambda a: np.linalg.cholesky(_sym(a)),
      _spd(3, 5)),
    R("linalg.eigh", np.linalg.eigh, lambda a: np.linalg.eigh(_sym(a))[0], _spd(3, 6)),
    R("linalg.eigh-vectors", np.linalg.eigh,
      lambda a: np.linalg.eigh(_sym(a), UPLO="U")[1] ** 2, _spd(3, 6)),
    R("linalg.eigvalsh", np.linalg.eigvalsh, lambda a: np.linalg.eigvalsh(_sym(a)),
      _spd(3, 7)),
    R("linalg.svd", np.linalg.svd,
      lambda a: np.linalg.svd(a, full_matrices=False)[1], _well((3, 2), 8)),
    R("linalg.svd-vectors", np.linalg.svd,
      lambda a: np.linalg.svd(a, full_matrices=False)[0] ** 2, _well((3, 2), 8)),
    R("linalg.svd-compute_uv", np.linalg.svd,
      lambda a: np.linalg.svd(a, compute_uv=False), _well((3, 3), 9)),
    R("linalg.svdvals", np.linalg.svdvals, np.linalg.svdvals, _well((2, 3), 10)),
    R("linalg.pinv", np.linalg.pinv, np.linalg.pinv, _well((3, 2), 11)),
    R("linalg.lstsq", np.linalg.lstsq, lambda a, b: np.linalg.lstsq(a, b)[0],
      _well((4, 2), 12), (4,)),
    R("linalg.matrix_power", np.linalg.matrix_power,
      lambda a: np.linalg.matrix_power(a, 3), (3, 3)),
    R("linalg.qr", np.linalg.qr, lambda a: np.linalg.qr(a)[1] ** 2, _well((3, 3), 13)),
    R("linalg.qr-complete", np.linalg.qr, lambda a: np.linalg.qr(a, "complete")[1] ** 2,
      _well((3, 2), 17)),
    R("linalg.qr-r", np.linalg.qr, lambda a: np.linalg.qr(a, mode="r") ** 2, _well((2, 3), 18)),
    R("linalg.norm-ord-3", np.linalg.norm, lambda a: np.linalg.norm(a, 3), (4,)),
    R("linalg.norm-ord-4-axis", np.linalg.norm, lambda a: np.linalg.norm(a, 4, axis=0), (3, 2)),
    R("linalg.norm-ord-minus1", np.linalg.norm, lambda a: np.linalg.norm(a, -1), fixed(
        0.5, -1.5, 2.0)),
    R("linalg.norm-ord-inf", np.linalg.norm, lambda a: np.linalg.norm(a, np.inf), (4,)),
    R("linalg.norm-ord-0", np.linalg.norm, lambda a: np.linalg.norm(a, 0), (4,)),
    R("linalg.norm-nuc", np.linalg.norm, lambda a: np.linalg.norm(a, "nuc"), _well((3, 3), 14)),
    R("linalg.norm-2-matrix", np.linalg.norm, lambda a: np.linalg.norm(a, 2), _well((3, 3), 15)),
    R("linalg.norm-minus2-matrix", np.linalg.norm,
      lambda a: np.linalg.norm(a, -2), _well((3, 3), 16)),
    R("linalg.norm-1-matrix", np.linalg.norm, lambda a: np.linalg.norm(a, 1), (3, 3)),
]


def _linalg_ready(row):
    """Whether tf.linalg has what the row's NumPy call forwards to."""
    name = row.func.__name__
    if name == "svd" and "compute_uv" in row.id:
        name = "svdvals"
    return name in NAMESPACES["linalg"]


# ---------------------------------------------------------------- the checks
def _inputs(row):
    rng = np.random.default_rng(zlib.crc32(row.id.encode()))
    return [np.array(s, dtype=np.float64) if isinstance(s, np.ndarray)
            else rng.standard_normal(s) for s in row.inputs]


def _outputs(v):
    return list(v) if isinstance(v, (list, tuple)) else [v]


def _call(row, args):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)   # NumPy 2's 2-vector np.cross
        return _outputs(row.call(*args))


def _weights(row, outs):
    rng = np.random.default_rng(zlib.crc32(row.id.encode()) + 1)
    return [rng.standard_normal(np.shape(o)) for o in outs]


def _projection(row, weights):
    """F(*tensors) = sum_k <out_k, W_k>: a scalar flowgrad function."""
    def F(*xs):
        outs = _call(row, xs)
        terms = [tf.sum(o * tf.tensor(w, dtype="float64")) for o, w in zip(outs, weights)
                 if isinstance(o, tf.Tensor)]
        return tf.add_n(terms) if len(terms) > 1 else terms[0]
    return F


def _np_projection(row, weights):
    def f(*arrays):
        return sum(float(np.sum(np.asarray(o) * w)) for o, w in zip(_call(row, arrays), weights)
                   if isinstance(o, np.ndarray) or np.ndim(o) == 0)
    return f


def run_row(row):
    arrays = _inputs(row)
    want = _call(row, arrays)
    got = _call(row, [tf.tensor(a, dtype="float64") for a in arrays])
    assert len(got) == len(want), row
    for g, w in zip(got, want):
        assert isinstance(g, tf.Tensor), (row, type(g))
        assert g.shape == np.shape(w), (row, g.shape, np.shape(w))
        assert g.dtype == "float64", (row, g.dtype)
        np.testing.assert_allclose(g.numpy(), w, rtol=1e-12, atol=1e-12, err_msg=row.id)
    for g in _call(row, [tf.tensor(a, dtype="float32") for a in arrays]):
        assert g.dtype == "float32", (row, g.dtype)
    # first order: against central differences of the NumPy call
    weights = _weights(row, want)
    F = _projection(row, weights)
    grads = analytic_grad(F, arrays)
    for k, (g, n) in enumerate(zip(grads, central_differences(_np_projection(row, weights), arrays, 1e-6))):
        np.testing.assert_allclose(g, n, rtol=1e-6, atol=1e-7, err_msg=f"{row.id} d/dx{k}")
    if row.order >= 2:      # second order: against central differences of the first
        vs = [np.random.default_rng(k).standard_normal(a.shape) for k, a in enumerate(arrays)]
        G = lift(F, [tf.tensor(v, dtype="float64") for v in vs])
        for k, (g, n) in enumerate(zip(analytic_grad(G, arrays), numeric_grad(G, arrays))):
            np.testing.assert_allclose(g, n, rtol=1e-5, atol=1e-6,
                                       err_msg=f"{row.id} d2/dx{k}")


@pytest.mark.parametrize("row", ROWS, ids=repr)
def test_numpy_call_on_tensors(row):
    run_row(row)


@pytest.mark.parametrize("row", LINALG_ROWS, ids=repr)
def test_np_linalg_forwards_to_tf_linalg(row):
    if not _linalg_ready(row):
        # while tf.linalg lacks it, the call keeps the unmapped path's clear error
        x = [tf.tensor(a, dtype="float64") for a in _inputs(row)]
        with pytest.raises(GradientError, match=r"np\.linalg\.\w+\(\).*no op for it"):
            tf.grads(lambda *t: tf.sum(_call(row, t)[0]))(x)
        pytest.skip(f"tf.linalg has no {row.func.__name__} yet")
    run_row(row)


def test_every_mapped_function_has_a_row():
    covered = set(CASES) | {r.func for r in ROWS + LINALG_ROWS}
    forwarded = {getattr(np.linalg, n) for n in ("eig", "eigvals", "matrix_rank", "cond",
                                                 "tensorinv", "tensorsolve")}
    assert set(NI.FUNCTIONS) - covered == forwarded
    new_ufuncs = {np.logaddexp, np.logaddexp2, np.fmax, np.fmin, np.deg2rad, np.rad2deg,
                  np.degrees, np.radians}
    assert new_ufuncs <= set(NI.UFUNCS) and new_ufuncs <= {r.func for r in ROWS}


# ---------------------------------------------------------------- semantics rows cannot show
def test_fmax_fmin_nan_semantics_and_gradient():
    a = np.array([1.0, np.nan, np.nan, 3.0])
    b = np.array([np.nan, 2.0, np.nan, -1.0])
    for f in (np.fmax, np.fmin):
        np.testing.assert_array_equal(f(tf.tensor(a), tf.tensor(b)).numpy(),
                                      f(a, b).astype(np.float32))
        ga, gb = tf.grads(lambda x, y, f=f: tf.sum(f(x, y)))([tf.tensor(a), tf.tensor(b)])
        # each entry's gradient goes to the operand it came from; two NaNs give NaN to a
        np.testing.assert_array_equal(ga.numpy()[[0, 1]], [1.0, 0.0])
        np.testing.assert_array_equal(gb.numpy()[[0, 1]], [0.0, 1.0])
    ga, gb = tf.grads(lambda x, y: tf.sum(np.fmax(x, y)))([tf.tensor(a), tf.tensor(b)])
    assert ga.numpy()[3] == 1.0 and gb.numpy()[3] == 0.0


def test_logaddexp_infinities_and_large_arguments():
    a = np.array([-np.inf, np.inf, np.inf, -np.inf, 800.0, -800.0, np.nan])
    b = np.array([-np.inf, np.inf, -np.inf, 2.0, 799.0, -801.0, 0.0])
    for f in (np.logaddexp, np.logaddexp2):
        with np.errstate(invalid="ignore"):
            want = f(a, b)
        np.testing.assert_allclose(f(tf.tensor(a, dtype="float64"),
                                     tf.tensor(b, dtype="float64")).numpy(), want,
                                   rtol=1e-14)
    # d/da log(e^a + e^b) = sigmoid(a - b): 1 / (1 + e^-1) at 800 vs 799, 1/2 at ties
    g = tf.grad(lambda x: np.logaddexp(x, tf.tensor([799.0, 3.0], dtype="float64")))(
        tf.tensor([800.0, 3.0], dtype="float64")).numpy()
    np.testing.assert_allclose(g, [1 / (1 + np.exp(-1.0)), 0.5], rtol=1e-14)


def test_sinc_derivatives_at_zero():
    # sinc(x) = 1 - (pi x)^2 / 6 + ...: sinc'(0) = 0, sinc''(0) = -pi^2 / 3
    d1 = tf.grad(lambda x: np.sinc(x))
    d2 = tf.grad(lambda x: d1(x))
    zero = tf.scalar(0.0, "float64")
    assert np.sinc(zero).item() == 1.0 and d1(zero).item() == 0.0
    np.testing.assert_allclose(d2(zero).item(), -np.pi ** 2 / 3, rtol=1e-12)
    assert np.sinc(tf.tensor([0.0, 0.5])).dtype == "float32"


def test_sort_puts_nan_last_as_numpy():
    a = np.array([[2.0, np.nan, -1.0, 0.5], [np.nan, 1.0, np.nan, -3.0]])
    np.testing.assert_array_equal(np.sort(tf.tensor(a, dtype="float64")).numpy(), np.sort(a))
    np.testing.assert_array_equal(np.sort(tf.tensor(a, dtype="float64"), axis=None).numpy(),
                                  np.sort(a, axis=None))


def test_nan_to_num_values_and_gradient():
    a = np.array([1.5, np.nan, np.inf, -np.inf, -2.0])
    for kw in ({}, {"nan": 7.0, "posinf": 1e3, "neginf": -5.0}):
        for dt in ("float64", "float32"):
            got = np.nan_to_num(tf.tensor(a, dtype=dt), **kw)
            assert got.dtype == dt
            np.testing.assert_array_equal(got.numpy(), np.nan_to_num(a.astype(dt), **kw))
    g = tf.grad(lambda x: tf.sum(np.nan_to_num(x) * 3.0))(tf.tensor(a, dtype="float64"))
    np.testing.assert_array_equal(g.numpy(), [3.0, 0.0, 0.0, 0.0, 3.0])


def test_triangles_select_rather_than_multiply():
    a = np.array([[1.0, np.inf], [np.nan, 2.0]])
    np.testing.assert_array_equal(np.tril(tf.tensor(a)).numpy(), np.tril(a))
    np.testing.assert_array_equal(np.triu(tf.tensor(a)).numpy(), np.triu(a))


def test_linspace_is_differentiable_in_start_and_stop():
    # y_i = start + i (stop - start) / (n - 1): dy_i/dstart = 1 - i / (n - 1)
    gs = tf.grads(lambda a, b: tf.sum(np.linspace(a, b, 5) * tf.tensor([1.0, 0, 0, 0, 2.0])))(
        [tf.scalar(0.5), tf.scalar(3.0)])
    np.testing.assert_allclose([g.item() for g in gs], [1.0, 2.0])
    y = np.linspace(tf.scalar(0.0), tf.scalar(1.0), 7, dtype=np.int32)
    assert y.dtype == "int32" and np.linspace(tf.scalar(1.0), 2.0, 0).shape == (0,)
    y, step = np.linspace(tf.scalar(1.0), tf.scalar(2.0), 1, retstep=True)
    assert y.numpy().tolist() == [1.0] and np.isnan(step)


def test_split_returns_lists_and_atleast_tuples_as_numpy():
    t = tf.ones([4, 2])
    assert isinstance(np.split(t, 2), list) and isinstance(np.array_split(t, 3), list)
    assert isinstance(np.atleast_2d(t, t), tuple) and isinstance(np.gradient(t), tuple)
    assert isinstance(np.gradient(t, axis=1), tf.Tensor)


# ---------------------------------------------------------------- refusals
REFUSED = [
    (lambda t: np.pad(t, 1, mode="mean"), ArgumentError, r"mode='mean'.*'constant', 'edge'"),
    (lambda t: np.pad(t, 1, mode="reflect", reflect_type="odd"), ArgumentError,
     r"'reflect_type' is not supported"),
    (lambda t: np.pad(t, 1, mode="edge", stat_length=2), ArgumentError, r"'stat_length'"),
    (lambda t: np.pad(t, -1), ArgumentError, r"non-negative"),
    (lambda t: np.pad(t, [1, 2, 3]), ShapeError, r"pad_width \[1, 2, 3\] does not fit"),
    (lambda t: np.nan_to_num(t, copy=False), ArgumentError, r"'copy'.*immutable"),
    (lambda t: np.sort(t, order="x"), ArgumentError, r"np\.sort\(\.\.\., order=\.\.\.\)"),
    (lambda t: np.partition(t, 9), ShapeError, r"kth 9 is out of bounds"),
    (lambda t: np.einsum(t, [0, 60]), ArgumentError, r"sublist 0 holds 60"),
    (lambda t: np.cross(t, t), ShapeError, r"4 and 4 components"),
    (lambda t: np.split(t, 3, axis=1), ShapeError, r"4 entries, which do not divide into 3"),
    (lambda t: np.array_split(t, 0), ArgumentError, r"larger than 0"),
    (lambda t: np.diff(t, -1), ArgumentError, r"non-negative"),
    (lambda t: np.gradient(t, edge_order=3), ArgumentError, r"edge_order must be 1 or 2"),
    (lambda t: np.gradient(t[:, :1], axis=1), ShapeError, r"has 1 entries"),
    (lambda t: np.gradient(t, 1.0, 2.0, 3.0), ArgumentError, r"3 spacing arguments"),
    (lambda t: np.gradient(t, [0.0, 1.0], axis=1), ShapeError, r"spacing of axis 1"),
    (lambda t: np.diag(t[None]), ShapeError, r"got shape \(1, 3, 4\)"),
    (lambda t: np.repeat(t, [1, 2], axis=1), ShapeError, r"2 repeats for an axis of 4"),
    (lambda t: np.linspace(t, t, -1), ArgumentError, r"non-negative"),
    (lambda t: np.moveaxis(t, 0, 5), ShapeError, r"axis 5 is out of bounds"),
    (lambda t: np.rot90(t, axes=(1, 1)), ArgumentError, r"must differ"),
    (lambda t: np.select([t > 0], [t, t]), ArgumentError, r"1 conditions and 2 choices"),
    (lambda t: np.select([t], [t]), ArgumentError, r"condlist\[0\] is a float64"),
    (lambda t: np.take(t, 12), ShapeError, r"out of bounds"),
    (lambda t: np.trace(t, out=np.zeros(())), ArgumentError, r"'out'"),
    (lambda t: np.einsum("ij", t, out=np.zeros((3, 4))), ArgumentError, r"'out'"),
    (lambda t: np.fliplr(t[0]), ShapeError, r"at least 2 axes"),
    (lambda t: np.linalg.outer(t, t), ShapeError, r"takes two vectors"),
    (lambda t: np.linalg.multi_dot([t]), ArgumentError, r"1 arrays given"),
    (lambda t: np.linalg.qr(t, mode="raw"), ArgumentError, r"mode='raw'"),
]


@pytest.mark.parametrize("i", range(len(REFUSED)))
def test_refusals_name_the_cause(i):
    f, err, pattern = REFUSED[i]
    t = tf.tensor(np.arange(12.0).reshape(3, 4))
    with pytest.raises(err, match=pattern):
        f(t)


def test_norm_orders_without_tf_linalg_norm_keep_the_unmapped_error(monkeypatch):
    monkeypatch.setitem(NAMESPACES, "linalg", {})
    x = tf.tensor([[1.0, 2.0], [3.0, 4.0]], dtype="float64")
    # the Euclidean and Frobenius norms are flowgrad's own
    assert np.linalg.norm(x, 2, axis=1).shape == (2,)
    np.testing.assert_allclose(np.linalg.norm(x, "fro").item(), np.sqrt(30.0))
    # others compute on the values outside a gradient, and are refused inside one
    np.testing.assert_allclose(np.linalg.norm(x, 2), np.linalg.norm(x.numpy(), 2))
    for ord in (3, "nuc", 2):
        with pytest.raises(GradientError, match=r"np\.linalg\.norm\(\)"):
            tf.grad(lambda t, o=ord: np.linalg.norm(t, o))(x)
    with pytest.raises(GradientError, match=r"np\.linalg\.solve\(\)"):
        tf.grad(lambda t: tf.sum(np.linalg.solve(t, t)))(x)
    np.testing.assert_allclose(np.linalg.det(x), -2.0)


def test_forwarded_keywords_tf_linalg_lacks_are_refused(monkeypatch):
    calls = []

    def solve(a, b):
        calls.append((a, b))
        return a

    def svd(a, full_matrices=True):
        calls.append(full_matrices)
        return a
    monkeypatch.setitem(NAMESPACES, "linalg", {"solve": solve, "svd": svd})
    x = tf.ones([2, 2])
    np.linalg.solve(x, b=x)
    np.linalg.svd(x, full_matrices=False, hermitian=False)
    assert calls[-1] is False and len(calls) == 2
    with pytest.raises(ArgumentError, match=r"np\.linalg\.svd\(\.\.\., hermitian=\.\.\.\)"):
        np.linalg.svd(x, hermitian=True)
    with pytest.raises(GradientError, match=r"np\.linalg\.svd\(\)"):      # no svdvals
        tf.grad(lambda t: tf.sum(np.linalg.svd(t, compute_uv=False)))(x)


def test_kinks_follow_numpy_autodiffs_not_tfjs():
    # NumPy code is differentiated as autograd, JAX and PyTorch do at kinks (what a NumPy
    # user's finite differences say, for abs and two-way ties); tf.* keeps TF.js's rules
    def t(*v):
        return tf.tensor(np.array(v, dtype=np.float64), dtype="float64")
    assert tf.grad(lambda x: np.abs(x).sum())(t(-2.0, 0.0, 3.0)).array_sync() == [-1, 0, 1]
    assert tf.grad(lambda x: np.fabs(x).sum())(t(0.0)).array_sync() == [0.0]
    assert tf.grad(lambda x: tf.abs(x).sum())(t(0.0)).array_sync() == [-1.0]     # TF.js
    # ties share the gradient: 1/2 each for two (the central difference), 1/3 for three
    assert tf.grad(lambda x: np.max(x))(t(3.0, 1.0, 3.0)).array_sync() == [0.5, 0, 0.5]
    g = tf.grad(lambda x: np.amin(x))(t(1.0, 1.0, 1.0, 2.0)).numpy()
    np.testing.assert_allclose(g, [1 / 3, 1 / 3, 1 / 3, 0], rtol=1e-15)
    g = tf.grad(lambda x: np.maximum.reduce(x, axis=0).sum())(
        tf.tensor([[2.0, 1.0], [2.0, 0.0]], dtype="float64")).numpy()
    np.testing.assert_array_equal(g, [[0.5, 1.0], [0.5, 0.0]])
    assert tf.grad(lambda x: tf.max(x))(t(3.0, 1.0, 3.0)).array_sync() == [1, 0, 1]  # TF.js
    # the standard deviation of a constant: 0, not sqrt'(0) * 0 = NaN
    assert tf.grad(lambda x: np.std(x))(t(3.5)).array_sync() == [0.0]
    g = tf.grad(lambda x: np.std(x, axis=0, keepdims=True).sum())(
        tf.tensor([[0.5, 1.0, -2.0]], dtype="float64")).numpy()
    np.testing.assert_array_equal(g, [[0.0, 0.0, 0.0]])
    # the values are NumPy's
    x = np.array([[3.0, -1.0, 3.0], [0.0, -0.0, 2.0]])
    for f in (np.abs, np.max, np.min, np.std, lambda a: np.max(a, axis=1)):
        np.testing.assert_array_equal(f(tf.tensor(x, dtype="float64")).numpy(), f(x))
