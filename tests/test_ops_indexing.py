"""Indexing and rearrangement ops: strided_slice, gather (batch_dims), gather_nd, scatter_nd,
tensor_scatter_update, mirror_pad, space_to_batch_nd / batch_to_space_nd, depth_to_space /
space_to_depth, linalg.band_part, diag.

Forward against NumPy references written here (loops and literal slices, not the kernels'
tricks), gradients against finite differences (a squared row per op checks the rule of the
rule), every error message, and hypothesis adjoint properties <op(x), y> = <x, op*(y)> with
op* taken through tf.grad.
"""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import flowgrad as tf
from flowgrad.errors import ArgumentError, DtypeError, ShapeError
from opcheck import BACKENDS, Case, run_case


def ints(a):
    return tf.tensor(np.asarray(a), dtype="int32")


# ---------------------------------------------------------------- NumPy references

def take_batched(x, idx, axis, bd):
    """gather with batch_dims, by a loop over the batch entries."""
    if bd == 0:
        return np.take(x, idx, axis=axis)
    return np.stack([take_batched(x[b], idx[b], axis - 1, bd - 1) for b in range(x.shape[0])])


def gather_nd_ref(x, idx):
    idx = np.asarray(idx)
    d = idx.shape[-1]
    flat = idx.reshape(-1, d)
    rows = [x[tuple(r)] for r in flat]
    return np.array(rows).reshape(idx.shape[:-1] + x.shape[d:])


def scatter_nd_ref(idx, u, shape):
    idx = np.asarray(idx)
    if idx.ndim == 1:
        idx = idx[:, None]
    d = idx.shape[-1]
    out = np.zeros(shape)
    flat_u = u.reshape((-1,) + tuple(shape[d:]))
    for r, v in zip(idx.reshape(-1, d), flat_u):
        out[tuple(r)] += v
    return out


def scatter_update_ref(t, idx, u):
    idx = np.asarray(idx)
    if idx.ndim == 1:
        idx = idx[:, None]
    d = idx.shape[-1]
    out = t.copy()
    for r, v in zip(idx.reshape(-1, d), u.reshape((-1,) + t.shape[d:])):
        out[tuple(r)] = v       # in order: the last write wins
    return out


def mirror_ref(x, pads, mode):
    for ax, (lo, hi) in enumerate(pads):
        n = x.shape[ax]
        if mode == "reflect":
            before, after = range(lo, 0, -1), range(n - 2, n - 2 - hi, -1)
        else:
            before, after = range(lo - 1, -1, -1), range(n - 1, n - 1 - hi, -1)
        x = np.concatenate([np.take(x, list(before), ax), x, np.take(x, list(after), ax)], ax)
    return x


def s2b_ref(x, block, pads):
    m = len(block)
    x = np.pad(x, [(0, 0)] + [tuple(p) for p in pads] + [(0, 0)] * (x.ndim - 1 - m))
    nb = x.shape[0]
    spatial = [x.shape[1 + k] // block[k] for k in range(m)]
    out = np.zeros((nb * int(np.prod(block)),) + tuple(spatial) + x.shape[1 + m:])
    for off in np.ndindex(*block):            # block offset, row-major
        o = int(np.ravel_multi_index(off, block)) if m else 0
        for pos in np.ndindex(*spatial):
            src = tuple(p * b + f for p, b, f in zip(pos, block, off))
            for n in range(nb):
                out[(o * nb + n,) + pos] = x[(n,) + src]
    return out


def b2s_ref(x, block, crops):
    m = len(block)
    nb = x.shape[0] // int(np.prod(block))
    spatial = x.shape[1:1 + m]
    full = np.zeros((nb,) + tuple(d * b for d, b in zip(spatial, block)) + x.shape[1 + m:])
    for off in np.ndindex(*block):
        o = int(np.ravel_multi_index(off, block))
        for pos in np.ndindex(*spatial):
            dst = tuple(p * b + f for p, b, f in zip(pos, block, off))
            for n in range(nb):
                full[(n,) + dst] = x[(o * nb + n,) + pos]
    key = (slice(None),) + tuple(slice(c0, full.shape[1 + k] - c1)
                                 for k, (c0, c1) in enumerate(crops))
    return full[key]


def d2s_ref(x, b, fmt):
    if fmt == "NCHW":
        return d2s_ref(x.transpose(0, 2, 3, 1), b, "NHWC").transpose(0, 3, 1, 2)
    n, h, w, c = x.shape
    co = c // (b * b)
    out = np.zeros((n, h * b, w * b, co))
    for i in range(h * b):
        for j in range(w * b):
            blk = (i % b) * b + j % b
            out[:, i, j, :] = x[:, i // b, j // b, blk * co:(blk + 1) * co]
    return out


def s2d_ref(x, b, fmt):
    if fmt == "NCHW":
        return s2d_ref(x.transpose(0, 2, 3, 1), b, "NHWC").transpose(0, 3, 1, 2)
    n, h, w, c = x.shape
    out = np.zeros((n, h // b, w // b, c * b * b))
    for i in range(h):
        for j in range(w):
            blk = (i % b) * b + j % b
            out[:, i // b, j // b, blk * c:(blk + 1) * c] = x[:, i, j, :]
    return out


def band_ref(a, lo, hi):
    m, n = a.shape[-2:]
    keep = np.ones((m, n), bool)
    if lo >= 0:
        keep &= np.triu(np.ones((m, n), bool), -lo)
    if hi >= 0:
        keep &= np.tril(np.ones((m, n), bool), hi)
    return np.where(keep, a, 0.0)


def diag_ref(x):
    n = x.size
    return (np.eye(n) * x.reshape(-1)).reshape(x.shape + x.shape)


# ---------------------------------------------------------------- the table

def sq(name, fn, ref, inputs, **kw):
    """The op squared: its gradient runs the op's rule on a dy that depends on x, so the
    second order differentiates the rule itself."""
    return Case(name + "^2", lambda *a: fn(*a).square(), lambda *a: ref(*a) ** 2, inputs,
                order=2, **kw)


SS = tf.strided_slice
IDX_B1 = np.array([[3, 0, 3, 1, 2], [1, 1, 0, 2, 3]])           # (2, 5), repeats
IDX_B2 = np.array([[[1, 1], [0, 2], [3, 3]], [[2, 0], [1, 1], [0, 3]]])   # (2, 3, 2)
ND2 = np.array([[0, 1], [2, 3], [0, 1], [1, 0]])                # depth 2, a repeat
ND3 = np.array([[[1, 0], [0, 2]], [[1, 2], [1, 0]]])            # (2, 2, 2) into (2, 3, 4)
UPD = np.array([[2, 1], [0, 0], [2, 1], [1, 3]])                # repeats: the last wins

CASES = [
    # strided_slice: literal NumPy slices are the references
    Case("strided_slice", lambda x: SS(x, [0, 1], [3, 4], [2, 2]),
         lambda x: x[0:3:2, 1:4:2], [((3, 4), "real")], 1),
    Case("strided_slice_neg_masks", lambda x: SS(x, [5, -1], [0, 0], [1, -1], begin_mask=1,
                                                 end_mask=3),
         lambda x: x[:, ::-1], [((2, 3), "real")], 1),
    Case("strided_slice_clamp", lambda x: SS(x, [-9, 1], [9, -1], [1, 1]),
         lambda x: x[-9:9, 1:-1], [((2, 4), "real")], 1),
    Case("strided_slice_ellipsis_newaxis", lambda x: SS(x, [0, 0, 1], [0, 0, 3], [1, 1, 1],
                                                        ellipsis_mask=1, new_axis_mask=2),
         lambda x: x[..., None, 1:3], [((2, 3, 4), "real")], 1),
    Case("strided_slice_shrink", lambda x: SS(x, [-1, 0], [0, 0], [1, 1], ellipsis_mask=2,
                                              shrink_axis_mask=1),
         lambda x: x[-1, ...], [((2, 3, 2), "real")], 1),
    Case("strided_slice_shrink_all", lambda x: SS(x, [1, 2], [0, 0], [1, 1],
                                                  shrink_axis_mask=3),
         lambda x: x[1, 2], [((2, 3), "real")], 1),
    Case("strided_slice_implicit_tail", lambda x: SS(x, [1], [3], [1]),
         lambda x: x[1:3], [((3, 2, 2), "real")], 1),
    sq("strided_slice", lambda x: SS(x, [2, 0], [0, 4], [-1, 3]),
       lambda x: x[2:0:-1, 0:4:3], [((3, 4), "real")]),
    # gather with batch_dims
    Case("gather_batch1", lambda x: tf.gather(x, ints(IDX_B1), 2, batch_dims=1),
         lambda x: take_batched(x, IDX_B1, 2, 1), [((2, 3, 4), "real")], 1),
    Case("gather_batch1_axis1", lambda x: tf.gather(x, ints(IDX_B1[:, :3] % 3), 1, 1),
         lambda x: take_batched(x, IDX_B1[:, :3] % 3, 1, 1), [((2, 3, 2), "real")], 1),
    Case("gather_batch2", lambda x: tf.gather(x, ints(IDX_B2), -1, batch_dims=-1),
         lambda x: take_batched(x, IDX_B2, 2, 2), [((2, 3, 4), "real")], 1),
    sq("gather_batch1", lambda x: x.gather(ints(IDX_B1), 2, 1),
       lambda x: take_batched(x, IDX_B1, 2, 1), [((2, 2, 4), "real")]),
    # gather_nd / scatter_nd / tensor_scatter_update
    Case("gather_nd_depth2", lambda x: tf.gather_nd(x, ints(ND2)),
         lambda x: gather_nd_ref(x, ND2), [((3, 4), "real")], 1),
    Case("gather_nd_depth1", lambda x: tf.gather_nd(x, [[2], [0], [2]]),
         lambda x: gather_nd_ref(x, [[2], [0], [2]]), [((3, 2), "real")], 1),
    Case("gather_nd_batched", lambda x: tf.gather_nd(x, ints(ND3)),
         lambda x: gather_nd_ref(x, ND3), [((2, 3, 4), "real")], 1),
    Case("gather_nd_single", lambda x: tf.gather_nd(x, [1, 2]),
         lambda x: x[1, 2], [((2, 3), "real")], 1),
    sq("gather_nd", lambda x: tf.gather_nd(x, ints(ND2)), lambda x: gather_nd_ref(x, ND2),
       [((3, 4), "real")]),
    Case("scatter_nd", lambda u: tf.scatter_nd(ints(ND2), u, [3, 4]),
         lambda u: scatter_nd_ref(ND2, u, (3, 4)), [((4,), "real")], 1),
    Case("scatter_nd_slices", lambda u: tf.scatter_nd([[3], [0], [3]], u, [4, 2]),
         lambda u: scatter_nd_ref([[3], [0], [3]], u, (4, 2)), [((3, 2), "real")], 1),
    Case("scatter_nd_rank1_indices", lambda u: tf.scatter_nd(ints([1, 3, 1]), u, [4, 2]),
         lambda u: scatter_nd_ref([1, 3, 1], u, (4, 2)), [((3, 2), "real")], 1),
    sq("scatter_nd", lambda u: tf.scatter_nd(ints(ND3), u, [2, 3, 2]),
       lambda u: scatter_nd_ref(ND3, u, (2, 3, 2)), [((2, 2, 2), "real")]),
    Case("tensor_scatter_update", lambda t, u: tf.tensor_scatter_update(t, ints(UPD), u),
         lambda t, u: scatter_update_ref(t, UPD, u), [((3, 4), "real"), ((4,), "real")], 1),
    Case("tensor_scatter_update_slices",
         lambda t, u: t.tensor_scatter_update([[1], [0]], u),
         lambda t, u: scatter_update_ref(t, [[1], [0]], u),
         [((3, 2), "real"), ((2, 2), "real")], 1),
    sq("tensor_scatter_update", lambda t, u: tf.tensor_scatter_update(t, ints(UPD), u),
       lambda t, u: scatter_update_ref(t, UPD, u), [((3, 4), "real"), ((4,), "real")]),
    # mirror_pad
    Case("mirror_pad_reflect", lambda x: tf.mirror_pad(x, [[2, 1], [1, 3]], "reflect"),
         lambda x: mirror_ref(x, [[2, 1], [1, 3]], "reflect"), [((3, 4), "real")], 1),
    Case("mirror_pad_symmetric", lambda x: x.mirror_pad([[3, 1], [0, 2]], "symmetric"),
         lambda x: mirror_ref(x, [[3, 1], [0, 2]], "symmetric"), [((3, 2), "real")], 1),
    sq("mirror_pad", lambda x: tf.mirror_pad(x, [[1, 2], [2, 0]], "symmetric"),
       lambda x: mirror_ref(x, [[1, 2], [2, 0]], "symmetric"), [((2, 3), "real")]),
    # space <-> batch
    Case("space_to_batch_nd", lambda x: tf.space_to_batch_nd(x, [2, 3], [[0, 0], [1, 2]]),
         lambda x: s2b_ref(x, [2, 3], [[0, 0], [1, 2]]), [((2, 4, 3, 1), "real")], 1),
    Case("space_to_batch_nd_1d_rest", lambda x: x.space_to_batch_nd([2], [[1, 0]]),
         lambda x: s2b_ref(x, [2], [[1, 0]]), [((1, 5, 2), "real")], 1),
    sq("space_to_batch_nd", lambda x: tf.space_to_batch_nd(x, [2, 2], [[1, 1], [0, 2]]),
       lambda x: s2b_ref(x, [2, 2], [[1, 1], [0, 2]]), [((1, 2, 2, 2), "real")]),
    Case("batch_to_space_nd", lambda x: tf.batch_to_space_nd(x, [2, 3], [[0, 1], [2, 1]]),
         lambda x: b2s_ref(x, [2, 3], [[0, 1], [2, 1]]), [((6, 2, 2, 1), "real")], 1),
    Case("batch_to_space_nd_1d_rest", lambda x: x.batch_to_space_nd([3], [[1, 1]]),
         lambda x: b2s_ref(x, [3], [[1, 1]]), [((6, 2, 2), "real")], 1),
    sq("batch_to_space_nd", lambda x: tf.batch_to_space_nd(x, [2, 2], [[1, 0], [0, 1]]),
       lambda x: b2s_ref(x, [2, 2], [[1, 0], [0, 1]]), [((4, 2, 1, 2), "real")]),
    # depth <-> space
    Case("depth_to_space_nhwc", lambda x: tf.depth_to_space(x, 2),
         lambda x: d2s_ref(x, 2, "NHWC"), [((1, 2, 3, 8), "real")], 1),
    Case("depth_to_space_nchw", lambda x: x.depth_to_space(2, "NCHW"),
         lambda x: d2s_ref(x, 2, "NCHW"), [((2, 8, 1, 2), "real")], 1),
    sq("depth_to_space", lambda x: tf.depth_to_space(x, 3), lambda x: d2s_ref(x, 3, "NHWC"),
       [((1, 1, 2, 9), "real")]),
    Case("space_to_depth_nhwc", lambda x: tf.space_to_depth(x, 2),
         lambda x: s2d_ref(x, 2, "NHWC"), [((1, 4, 2, 3), "real")], 1),
    Case("space_to_depth_nchw", lambda x: tf.space_to_depth(x, 2, "NCHW"),
         lambda x: s2d_ref(x, 2, "NCHW"), [((2, 2, 2, 4), "real")], 1),
    sq("space_to_depth", lambda x: tf.space_to_depth(x, 2, "NCHW"),
       lambda x: s2d_ref(x, 2, "NCHW"), [((1, 1, 2, 4), "real")]),
    # band_part / diag
    Case("band_part_1_0", lambda a: tf.linalg.band_part(a, 1, 0), lambda a: band_ref(a, 1, 0),
         [((3, 4), "real")], 1),
    Case("band_part_batch", lambda a: tf.linalg.band_part(a, -1, 1),
         lambda a: band_ref(a, -1, 1), [((2, 4, 3), "real")], 1),
    Case("band_part_all", lambda a: tf.linalg.bandPart(a, -1, -1),
         lambda a: band_ref(a, -1, -1), [((2, 2), "real")], 1),
    sq("band_part", lambda a: tf.linalg.band_part(a, 0, 2), lambda a: band_ref(a, 0, 2),
       [((3, 4), "real")]),
    Case("diag", tf.diag, diag_ref, [((3,), "real")], 1),
    Case("diag_2d", tf.diag, diag_ref, [((2, 2), "real")], 1),
    sq("diag", tf.diag, diag_ref, [((2, 2), "real")]),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", CASES, ids=repr)
def test_op(case, backend):
    run_case(case, backend)


# ---------------------------------------------------------------- specific behaviour

def test_mirror_pad_gradient_counts_the_mirrored_copies():
    # reference §12 #5: TF.js gives [1, 1, 1] (a slice of dy); every copy counts
    g = tf.grad(lambda x: tf.mirror_pad(x, [[2, 1]], "reflect").sum())(tf.tensor([1., 2, 3]))
    assert g.array_sync() == [1.0, 3.0, 2.0]
    g = tf.grad(lambda x: x.mirror_pad([[2, 1]], "symmetric").sum())(tf.tensor([1., 2, 3]))
    assert g.array_sync() == [2.0, 2.0, 2.0]      # [2, 1, 1, 2, 3, 3]


def test_tensor_scatter_update_duplicates_last_wins_and_gets_the_gradient():
    t = tf.zeros([3])
    u = tf.tensor([1.0, 2.0, 3.0])
    idx = [[1], [2], [1]]
    assert tf.tensor_scatter_update(t, idx, u).array_sync() == [0.0, 3.0, 2.0]
    gt, gu = tf.grads(lambda t, u: (tf.tensor_scatter_update(t, idx, u)
                                    * tf.tensor([1., 2, 3])).sum())([t, u])
    assert gt.array_sync() == [1.0, 0.0, 0.0]
    assert gu.array_sync() == [0.0, 3.0, 2.0]


def test_scatter_nd_duplicates_add():
    out = tf.scatter_nd([[0, 1], [0, 1], [1, 0]], tf.tensor([1.0, 2.0, 4.0]), [2, 2])
    assert out.array_sync() == [[0.0, 3.0], [4.0, 0.0]]


@pytest.mark.parametrize("dtype", ["int32", "bool", "float64"])
def test_other_dtypes_keep_their_dtype(dtype):
    x = tf.tensor([[1, 0, 1], [0, 1, 1]], dtype=dtype)
    a = x.numpy()
    outs = {
        "gather_nd": (tf.gather_nd(x, [[1, 2], [0, 1]]), a[[1, 0], [2, 1]]),
        "gather_b": (tf.gather(x, [[2], [0]], 1, 1), np.array([[a[0, 2]], [a[1, 0]]])),
        "mirror_pad": (tf.mirror_pad(x, [[1, 1], [2, 0]], "reflect"),
                       np.pad(a, [(1, 1), (2, 0)], "reflect")),
        "strided": (tf.strided_slice(x, [1, 2], [0, 0], [-1, -2], end_mask=3), a[1::-1, 2::-2]),
        "band_part": (tf.linalg.band_part(x, 0, 1), np.where(np.triu(np.tril(np.ones((2, 3)),
                                                                              1)) > 0, a, 0)),
        "diag": (tf.diag(x[0]), np.diag(a[0])),
        "tsu": (tf.tensor_scatter_update(x, [[0, 0]], tf.tensor([a[1, 0]], dtype=dtype)),
                np.where(np.eye(2, 3, dtype=bool) & (np.arange(2)[:, None] == 0), a[1, 0], a)),
        "s2b": (tf.space_to_batch_nd(x.reshape([1, 2, 3]), [2], [[0, 0]]),
                a.reshape(1, 2, 3)[:, [[0], [1]]].reshape(2, 1, 3)),
    }
    for name, (got, want) in outs.items():
        assert got.dtype == dtype, name
        np.testing.assert_array_equal(got.numpy(), np.asarray(want).astype(a.dtype),
                                      err_msg=name)


def test_integer_index_inputs_get_no_gradient_and_backprop_works():
    x = tf.tensor([[1.0, 2.0], [3.0, 4.0]])
    g = tf.grad(lambda x: tf.gather_nd(x, [[1, 1], [1, 1]]).sum())(x)
    assert g.array_sync() == [[0.0, 0.0], [0.0, 2.0]]
    g = tf.grad(lambda x: tf.gather(x, [[1, 1], [0, 0]], 1, 1).sum())(x)
    assert g.array_sync() == [[0.0, 2.0], [2.0, 0.0]]


def test_space_to_batch_and_batch_to_space_are_inverses():
    x = tf.tensor(np.arange(24.0).reshape(2, 2, 6, 1))
    y = tf.space_to_batch_nd(x, [2, 3], [[0, 0], [0, 0]])
    assert y.shape == (12, 1, 2, 1)
    np.testing.assert_array_equal(tf.batch_to_space_nd(y, [2, 3], [[0, 0], [0, 0]]).numpy(),
                                  x.numpy())


def test_strided_slice_identity_and_camel_case():
    x = tf.tensor([[1.0, 2.0], [3.0, 4.0]])
    assert tf.stridedSlice(x, [0, 0], [2, 2]).array_sync() == x.array_sync()
    assert x.strided_slice([0], [0], end_mask=1).shape == (2, 2)
    assert tf.gatherND is tf.gather_nd and tf.scatterND is tf.scatter_nd
    assert tf.tensorScatterUpdate is tf.tensor_scatter_update
    assert tf.spaceToBatchND is tf.space_to_batch_nd and tf.depthToSpace is tf.depth_to_space


# ---------------------------------------------------------------- errors

V = tf.tensor([1.0, 2.0, 3.0])
M = tf.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
IMG = tf.zeros([1, 2, 2, 4])


def row(id_, fn, cls, message):
    return pytest.param(fn, cls, message, id=id_)


ERRORS = [
    # strided_slice
    row("ss-lengths", lambda: tf.strided_slice(M, [0, 0], [1], [1, 1]), ArgumentError,
        "strided_slice(): begin, end and strides must have the same length, got 2, 1 and 2"),
    row("ss-ellipses", lambda: tf.strided_slice(M, [0, 0], [0, 0], ellipsis_mask=3),
        ArgumentError, "strided_slice(): Multiple ellipses in slice is not allowed. "
        "(ellipsis_mask 3 has more than one bit set)"),
    row("ss-stride-zero", lambda: tf.strided_slice(M, [0, 0], [1, 1], [1, 0]), ArgumentError,
        "strided_slice(): strides[1] must be non-zero"),
    row("ss-shrink-stride", lambda: tf.strided_slice(M, [1], [0], [-1], shrink_axis_mask=1),
        ArgumentError, "strided_slice(): only stride 1 allowed on non-range indexing. "
        "(entry 0 shrinks an axis with stride -1)"),
    row("ss-shrink-bounds", lambda: tf.strided_slice(M, [0, -4], [0, 0], shrink_axis_mask=2),
        ShapeError, "strided_slice(): slice index -4 of dimension 1 out of bounds. (axis 1 of "
        "x (2, 3) has 3 entries)"),
    row("ss-too-many", lambda: tf.strided_slice(V, [0, 0], [1, 1]), ShapeError,
        "strided_slice(): Index out of range using input dim 1; input has only 1 dims: 2 "
        "entries of begin index an axis of x (shape (3,))"),
    row("ss-mask-negative", lambda: tf.strided_slice(V, [0], [1], begin_mask=-1),
        ArgumentError, "strided_slice: begin_mask must be >= 0, got -1"),
    row("ss-begin-float", lambda: tf.strided_slice(V, [0.5], [1]), ArgumentError,
        "strided_slice: begin[0] must be an integer, got 0.5"),
    # gather batch_dims
    row("gather-bd-range", lambda: tf.gather(M, [0, 1], 1, batch_dims=2), ArgumentError,
        "gather(): Expect batchDims in the range of [-1, 1], but got 2 (indices has rank 1)"),
    row("gather-bd-axis", lambda: tf.gather(M, [[0], [1]], 0, batch_dims=1), ArgumentError,
        "gather(): batchDims (1) must be less than or equal to axis (0)."),
    row("gather-bd-shape", lambda: tf.gather(M, [[0, 1]], 1, batch_dims=1), ShapeError,
        "gather(): x.shape[0]: 2 should be equal to indices.shape[0]: 1. The first "
        "batch_dims (1) axes of x (2, 3) and indices (1, 2) must match."),
    row("gather-bd-float", lambda: tf.gather(M, [[0], [1]], 1, batch_dims=0.5),
        ArgumentError, "gather: batch_dims must be an integer, got 0.5"),
    row("gather-bd-index-range", lambda: tf.gather(M, [[0], [3]], 1, 1), ShapeError,
        "gather(): index 3 is out of range for axis 1 of x, which has 3 entries (shape (2, 3))."),
    # gather_nd
    row("gnd-scalar-x", lambda: tf.gather_nd(tf.scalar(1.0), [0]), ShapeError,
        "gather_nd() expects the input to be rank 1 or higher, but the rank was 0."),
    row("gnd-scalar-indices", lambda: tf.gather_nd(V, tf.scalar(0, dtype="int32")),
        ShapeError, "gather_nd() expects the indices to be rank 1 or higher, but the rank "
        "was 0."),
    row("gnd-dtype", lambda: tf.gather_nd(V, tf.tensor([0.5])), DtypeError,
        "Argument 'indices' passed to 'gather_nd' must be int32 tensor, but got float32"),
    row("gnd-depth", lambda: tf.gather_nd(V, [[0, 0]]), ShapeError,
        "gather_nd(): index innermost dimension length must be <= tensor rank; saw: 2 vs. 1 "
        "(indices of shape (1, 2) into x of shape (3,))"),
    row("gnd-range", lambda: tf.gather_nd(M, [[0, 0], [1, 3]]), ShapeError,
        "gather_nd(): Invalid indices: [1, 3] (index tuple 1 of indices) does not index into "
        "x of shape (2, 3): its entry 1 is 3, valid values are 0 to 2 for axis 1 of size 3."),
    row("gnd-negative", lambda: tf.gather_nd(M, [[-1, 0]]), ShapeError,
        "gather_nd(): Invalid indices: [-1, 0] (index tuple 0 of indices) does not index"),
    # scatter_nd
    row("snd-indices-rank", lambda: tf.scatter_nd(tf.scalar(0, dtype="int32"), V, [3]),
        ShapeError, "scatter_nd() expects the indices to be rank 1 or higher, but the rank "
        "was 0."),
    row("snd-updates-rank", lambda: tf.scatter_nd([[0]], tf.scalar(1.0), [3]), ShapeError,
        "scatter_nd() expects the updates to be rank 1 or higher, but the rank was 0."),
    row("snd-shape-empty", lambda: tf.scatter_nd([[0]], V[:1], []), ShapeError,
        "scatter_nd(): Output rank must be greater or equal to 1, but got shape: []"),
    row("snd-updates-shape", lambda: tf.scatter_nd([[0], [1]], V, [3]), ShapeError,
        "scatter_nd(): Must have updates.shape = indices.shape[:batchDim] + "
        "shape[sliceDim:], got updates.shape: (3,), indices.shape: (2, 1), shape: (3,), "
        "sliceDim: 1, and batchDim: 1 (updates of shape (2,) expected)."),
    row("snd-depth", lambda: tf.scatter_nd([[0, 0]], V[:1], [3]), ShapeError,
        "sliceDim: 2, and batchDim: 1 (index depth 2 exceeds the output rank 1)."),
    row("snd-range", lambda: tf.scatter_nd([[0], [3]], V[:2], [3]), ShapeError,
        "scatter_nd(): Invalid indices: [3] (index tuple 1 of indices) does not index into the "
        "output of shape (3,): its entry 0 is 3, valid values are 0 to 2"),
    row("snd-shape-negative", lambda: tf.scatter_nd([[0]], V[:1], [-3]), ArgumentError,
        "scatter_nd: shape[0] must be >= 0, got -3"),
    row("snd-dtype", lambda: tf.scatter_nd(tf.tensor([[True]]), V[:1], [3]), DtypeError,
        "Argument 'indices' passed to 'scatter_nd' must be int32 tensor, but got bool tensor"),
    # tensor_scatter_update
    row("tsu-dtype", lambda: tf.tensor_scatter_update(V, [[0]], ints([1])),
        DtypeError, "tensor_scatter_update(): tensor and updates must have the same dtype, "
        "instead they are float32 and int32. Cast one of them (updates.cast('float32'))."),
    row("tsu-scalar", lambda: tf.tensor_scatter_update(tf.scalar(1.0), [[0]], [1.0]),
        ShapeError, "tensor_scatter_update(): Output rank must be greater or equal to 1, but "
        "got shape: []"),
    row("tsu-shape", lambda: tf.tensor_scatter_update(M, [[0]], V), ShapeError,
        "tensor_scatter_update(): Must have updates.shape = indices.shape[:batchDim] + "
        "shape[sliceDim:], got updates.shape: (3,), indices.shape: (1, 1), shape: (2, 3)"),
    row("tsu-range", lambda: tf.tensor_scatter_update(M, [[2]], [V.array_sync()]), ShapeError,
        "tensor_scatter_update(): Invalid indices: [2] (index tuple 0 of indices) does not "
        "index into the output of shape (2, 3)"),
    # mirror_pad
    row("mp-mode", lambda: tf.mirror_pad(V, [[1, 1]], "edge"), ArgumentError,
        "mirror_pad(): Invalid mode. Mode must be either reflect or symmetric. Got 'edge'."),
    row("mp-scalar", lambda: tf.mirror_pad(tf.scalar(1.0), [], "reflect"), ShapeError,
        "mirror_pad(): mirrorPad(scalar) is not defined. Pass non-scalar to mirrorPad"),
    row("mp-count", lambda: tf.mirror_pad(M, [[1, 1]], "reflect"), ShapeError,
        "mirror_pad(): Padding doesn't match input. Must be 2. Got 1. Give one [before, "
        "after] pair per axis of x (2, 3)."),
    row("mp-pair", lambda: tf.mirror_pad(V, [[1, 1, 1]], "reflect"), ShapeError,
        "mirror_pad(): Invalid number of paddings. Must be length of 2 each. Got [[1, 1, 1]]."),
    row("mp-reflect-big", lambda: tf.mirror_pad(V, [[0, 3]], "reflect"), ShapeError,
        "mirror_pad(): Padding in dimension 0 cannot be greater than 2 or less than 0 for "
        "input of shape (3,) (got [0, 3], mode 'reflect')."),
    row("mp-symmetric-big", lambda: tf.mirror_pad(M, [[0, 0], [4, 0]], "symmetric"),
        ShapeError, "mirror_pad(): Padding in dimension 1 cannot be greater than 3 or less "
        "than 0 for input of shape (2, 3) (got [4, 0], mode 'symmetric')."),
    row("mp-negative", lambda: tf.mirror_pad(V, [[-1, 0]], "symmetric"), ShapeError,
        "Padding in dimension 0 cannot be greater than 3 or less than 0"),
    # space_to_batch_nd / batch_to_space_nd
    row("s2b-rank", lambda: tf.space_to_batch_nd(V, [1, 1], [[0, 0], [0, 0]]), ShapeError,
        "space_to_batch_nd(): input rank 1 should be > than [blockShape] 2 (x of shape (3,) "
        "needs a batch axis and 2 spatial axes)"),
    row("s2b-paddings-count", lambda: tf.space_to_batch_nd(IMG, [2, 2], [[0, 0]]), ShapeError,
        "space_to_batch_nd(): paddings.shape[0] 1 must be equal to [blockShape] 2"),
    row("s2b-divisible", lambda: tf.space_to_batch_nd(IMG, [2, 2], [[0, 1], [0, 0]]),
        ShapeError, "space_to_batch_nd(): input spatial dimensions [2, 2, 4] with paddings "
        "[[0, 1], [0, 0]] must be divisible by blockShapes [2, 2] (padded sizes [3, 2])"),
    row("s2b-block", lambda: tf.space_to_batch_nd(IMG, [0, 2], [[0, 0], [0, 0]]),
        ArgumentError, "space_to_batch_nd: block_shape[0] must be >= 1, got 0"),
    row("s2b-pad-negative", lambda: tf.space_to_batch_nd(IMG, [2, 2], [[0, 0], [-2, 0]]),
        ShapeError, "space_to_batch_nd(): paddings [[0, 0], [-2, 0]] must give 2 "
        "non-negative [before, after] pair(s)"),
    row("s2b-pad-form", lambda: tf.space_to_batch_nd(IMG, [2, 2], [0, 0]), ArgumentError,
        "space_to_batch_nd(): paddings must be a list of [before, after] pairs, got [0, 0]"),
    row("b2s-rank", lambda: tf.batch_to_space_nd(V, [3], [[0, 0]]), ShapeError,
        "batch_to_space_nd(): input rank is 1 but should be > than blockShape.length 1"),
    row("b2s-crops-count", lambda: tf.batch_to_space_nd(IMG, [1, 1], [[0, 0]]), ShapeError,
        "batch_to_space_nd(): crops.length is 1 but should be equal to blockShape.length  2"),
    row("b2s-batch", lambda: tf.batch_to_space_nd(IMG, [2, 1], [[0, 0], [0, 0]]), ShapeError,
        "batch_to_space_nd(): input tensor batch is 1 but is not divisible by the product of "
        "the elements of blockShape 2 * 1 === 2"),
    row("b2s-crop-big", lambda: tf.batch_to_space_nd(IMG, [1, 1], [[1, 2], [0, 0]]),
        ShapeError, "batch_to_space_nd(): crops [1, 2] of spatial axis 0 remove more than its "
        "2 entries (x.shape[1] * blockShape[0])"),
    # depth_to_space / space_to_depth
    row("d2s-format", lambda: tf.depth_to_space(IMG, 2, "NWHC"), ArgumentError,
        "depth_to_space(): data_format must be 'NHWC' or 'NCHW', got 'NWHC'"),
    row("d2s-rank", lambda: tf.depth_to_space(M, 2), ShapeError,
        "depth_to_space(): x must be a rank-4 tensor (NHWC), got rank 2 (shape (2, 3))"),
    row("d2s-block", lambda: tf.depth_to_space(IMG, 1), ArgumentError,
        "depth_to_space(): blockSize should be > 1 for depth_to_space, but was: 1"),
    row("d2s-depth", lambda: tf.depth_to_space(IMG, 2, "NCHW"), ShapeError,
        "depth_to_space(): Dimension size must be evenly divisible by 4 but is 2 for "
        "depthToSpace with input shape (1, 2, 2, 4)"),
    row("s2d-divisible", lambda: tf.space_to_depth(tf.zeros([1, 4, 3, 1]), 2), ShapeError,
        "space_to_depth(): Image height 4 and width 3 should be divisible by block_size: 2 "
        "(input shape (1, 4, 3, 1), NHWC)"),
    row("s2d-block-float", lambda: tf.space_to_depth(IMG, 2.5), ArgumentError,
        "space_to_depth: block_size must be an integer, got 2.5"),
    # band_part / diag
    row("band-rank", lambda: tf.linalg.band_part(V, 0, 0), ShapeError,
        "band_part(): Rank must be at least 2, got 1."),
    row("band-lower", lambda: tf.linalg.band_part(M, 3, 0), ArgumentError,
        "band_part(): num_lower (3) must not be greater than the number of rows (2)."),
    row("band-upper", lambda: tf.linalg.band_part(M, 0, 4), ArgumentError,
        "band_part(): num_upper (4) must not be greater than the number of columns (3)."),
    row("band-float", lambda: tf.linalg.band_part(M, 0.5, 0), ArgumentError,
        "band_part: num_lower must be an integer, got 0.5"),
    row("diag-str", lambda: tf.diag("ab"), ArgumentError,
        "Argument 'x' passed to 'diag' must be a Tensor or TensorLike, but got 'str'"),
]


@pytest.mark.parametrize("fn,cls,message", ERRORS)
def test_error(fn, cls, message):
    with pytest.raises(cls) as info:
        fn()
    assert message in str(info.value)


# ---------------------------------------------------------------- adjoint properties

SETTINGS = settings(max_examples=25, deadline=None)
vals = st.floats(-2, 2, allow_nan=False, width=32)


def adjoint_of(op, x, y):
    """op*(y), through tf.grad: the gradient of <op(x), y> with respect to x."""
    return tf.grad(lambda t: (op(t) * y).sum())(x).numpy()


def check_adjoint(op, x, y_shape, data):
    y = data.draw(hnp.arrays(np.float64, y_shape, elements=vals))
    tx, ty = tf.tensor(x, dtype="float64"), tf.tensor(y, dtype="float64")
    lhs = float((op(tx).numpy() * y).sum())
    rhs = float((x * adjoint_of(op, tx, ty)).sum())
    assert np.isclose(lhs, rhs, rtol=1e-9, atol=1e-9)


@st.composite
def nd_setup(draw):
    shape = draw(hnp.array_shapes(min_dims=1, max_dims=3, max_side=4))
    d = draw(st.integers(1, len(shape)))
    batch = draw(hnp.array_shapes(min_dims=1, max_dims=2, max_side=4))
    idx = np.stack([draw(hnp.arrays(np.int32, batch, elements=st.integers(0, s - 1)))
                    for s in shape[:d]], -1)
    x = draw(hnp.arrays(np.float64, shape, elements=vals))
    return x, idx


@SETTINGS
@given(nd_setup(), st.data())
def test_gather_nd_and_scatter_nd_are_adjoint(setup, data):
    x, idx = setup
    d = idx.shape[-1]
    y_shape = idx.shape[:-1] + x.shape[d:]
    y = data.draw(hnp.arrays(np.float64, y_shape, elements=vals))
    tx, ty, ti = tf.tensor(x, dtype="float64"), tf.tensor(y, dtype="float64"), ints(idx)
    lhs = float((tf.gather_nd(tx, ti).numpy() * y).sum())
    scattered = tf.scatter_nd(ti, ty, list(x.shape)).numpy()
    assert np.isclose(lhs, float((x * scattered).sum()), rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(adjoint_of(lambda t: tf.gather_nd(t, ti), tx, ty), scattered)


@st.composite
def batch_gather_setup(draw):
    shape = draw(hnp.array_shapes(min_dims=1, max_dims=4, max_side=3))
    axis = draw(st.integers(0, len(shape) - 1))
    bd = draw(st.integers(0, axis))
    extra = draw(hnp.array_shapes(min_dims=0, max_dims=2, max_side=3))
    idx = draw(hnp.arrays(np.int32, shape[:bd] + extra,
                          elements=st.integers(0, shape[axis] - 1)))
    x = draw(hnp.arrays(np.float64, shape, elements=vals))
    return x, idx, axis, bd


@SETTINGS
@given(batch_gather_setup(), st.data())
def test_gather_with_batch_dims_matches_loops_and_its_adjoint(setup, data):
    x, idx, axis, bd = setup
    ti = ints(idx)
    op = lambda t: tf.gather(t, ti, axis, batch_dims=bd)  # noqa: E731
    out = op(tf.tensor(x, dtype="float64"))
    np.testing.assert_array_equal(out.numpy(), take_batched(x, idx, axis, bd))
    check_adjoint(op, x, out.shape, data)


@st.composite
def space_setup(draw):
    m = draw(st.integers(1, 2))
    block = draw(st.lists(st.integers(1, 3), min_size=m, max_size=m))
    pads, spatial = [], []
    for b in block:
        lo, hi = draw(st.integers(0, 2)), draw(st.integers(0, 2))
        size = draw(st.integers(1, 2)) * b - lo - hi
        if size < 1:
            lo, hi, size = 0, 0, b
        pads.append([lo, hi])
        spatial.append(size)
    batch = draw(st.integers(1, 2))
    rest = draw(hnp.array_shapes(min_dims=0, max_dims=1, max_side=2))
    x = draw(hnp.arrays(np.float64, (batch, *spatial, *rest), elements=vals))
    return x, block, pads


@SETTINGS
@given(space_setup(), st.data())
def test_space_to_batch_and_batch_to_space_are_adjoint(setup, data):
    x, block, pads = setup
    s2b = lambda t: tf.space_to_batch_nd(t, block, pads)  # noqa: E731
    y = s2b(tf.tensor(x, dtype="float64"))
    np.testing.assert_array_equal(y.numpy(), s2b_ref(x, block, pads))
    # batch_to_space with crops = paddings inverts it, and is its adjoint
    back = tf.batch_to_space_nd(y, block, pads)
    np.testing.assert_array_equal(back.numpy(), x)
    check_adjoint(s2b, x, y.shape, data)
    yv = data.draw(hnp.arrays(np.float64, y.shape, elements=vals))
    lhs = float((y.numpy() * yv).sum())
    rhs = float((x * tf.batch_to_space_nd(tf.tensor(yv, dtype="float64"), block,
                                          pads).numpy()).sum())
    assert np.isclose(lhs, rhs, rtol=1e-9, atol=1e-9)
    b2s = lambda t: tf.batch_to_space_nd(t, block, pads)  # noqa: E731
    check_adjoint(b2s, y.numpy(), x.shape, data)


@st.composite
def mirror_setup(draw):
    shape = draw(hnp.array_shapes(min_dims=1, max_dims=3, max_side=4))
    mode = draw(st.sampled_from(["reflect", "symmetric"]))
    off = 1 if mode == "reflect" else 0
    pads = [[draw(st.integers(0, s - off)), draw(st.integers(0, s - off))] for s in shape]
    x = draw(hnp.arrays(np.float64, shape, elements=vals))
    return x, pads, mode


@SETTINGS
@given(mirror_setup(), st.data())
def test_mirror_pad_and_its_gradient_are_adjoint(setup, data):
    x, pads, mode = setup
    op = lambda t: tf.mirror_pad(t, pads, mode)  # noqa: E731
    y = op(tf.tensor(x, dtype="float64"))
    np.testing.assert_array_equal(y.numpy(), mirror_ref(x, pads, mode))
    check_adjoint(op, x, y.shape, data)


@SETTINGS
@given(st.integers(2, 3), st.sampled_from(["NHWC", "NCHW"]), st.data())
def test_depth_to_space_and_space_to_depth_are_inverse_and_adjoint(b, fmt, data):
    n, h, w, c = (data.draw(st.integers(1, 2)) for _ in range(4))
    shape = (n, h, w, c * b * b) if fmt == "NHWC" else (n, c * b * b, h, w)
    x = data.draw(hnp.arrays(np.float64, shape, elements=vals))
    d2s = lambda t: tf.depth_to_space(t, b, fmt)  # noqa: E731
    y = d2s(tf.tensor(x, dtype="float64"))
    np.testing.assert_array_equal(y.numpy(), d2s_ref(x, b, fmt))
    np.testing.assert_array_equal(tf.space_to_depth(y, b, fmt).numpy(), x)
    check_adjoint(d2s, x, y.shape, data)
