"""Matrix products: mat_mul (batched, broadcasting batch axes, optional transposes),
dot and outer_product."""
from .. import engine as E
from ..errors import ShapeError
from ._core import binary_args, export, primitive
from .shape import reshape


@primitive("BatchMatMul")
def _mat_mul(B, a, b, transpose_a, transpose_b):
    if transpose_a:
        a = B.swapaxes(a, -1, -2)
    if transpose_b:
        b = B.swapaxes(b, -1, -2)
    return B.matmul(a, b)


@_mat_mul.def_vjp
def _(dy, a, b, transpose_a, transpose_b, needs):
    da = db = None
    if not transpose_a and not transpose_b:
        da = mat_mul(dy, b, False, True) if needs[0] else None
        db = mat_mul(a, dy, True, False) if needs[1] else None
    elif not transpose_a:
        da = mat_mul(dy, b) if needs[0] else None
        db = mat_mul(dy, a, True, False) if needs[1] else None
    elif not transpose_b:
        da = mat_mul(b, dy, False, True) if needs[0] else None
        db = mat_mul(a, dy) if needs[1] else None
    else:
        da = mat_mul(b, dy, True, True) if needs[0] else None
        db = mat_mul(dy, a, True, True) if needs[1] else None
    return da, db


@export
def mat_mul(a, b, transpose_a=False, transpose_b=False):
    """The matrix product a·b of rank >= 2 tensors; leading (batch) axes broadcast.

    >>> import flowgrad as tf
    >>> tf.mat_mul(tf.tensor([[1, 2], [3, 4]]), tf.tensor([[5], [6]])).print()
    Tensor
        [[17],
         [39]]
    """
    a, b = binary_args(a, b, "mat_mul")
    if a.rank < 2 or b.rank < 2:
        raise ShapeError(f"Error in matMul: inputs must have the same rank of at least 2, got "
                         f"ranks {a.rank} and {b.rank}. Use dot() for vectors.")
    inner_a = a.shape[-2] if transpose_a else a.shape[-1]
    inner_b = b.shape[-1] if transpose_b else b.shape[-2]
    if inner_a != inner_b:
        raise ShapeError(f"Error in matMul: inner shapes ({inner_a}) and ({inner_b}) of Tensors "
                         f"with shapes {a.shape} and {b.shape} and transposeA={transpose_a} "
                         f"and transposeB={transpose_b} must match.")
    ba, bb = a.shape[:-2], b.shape[:-2]
    for x, y in zip(reversed(ba), reversed(bb)):
        if x != y and x != 1 and y != 1:
            raise ShapeError(f"Error in matMul: the batch dimensions {ba} and {bb} of shapes "
                             f"{a.shape} and {b.shape} do not broadcast.")
    return E.run_kernel(_mat_mul, (a, b), {"transpose_a": bool(transpose_a),
                                           "transpose_b": bool(transpose_b)})


@export
def dot(t1, t2):
    """Dot product of vectors and matrices (rank 1 or 2 each).

    >>> import flowgrad as tf
    >>> tf.dot(tf.tensor([1, 2]), tf.tensor([3, 4])).print()
    Tensor
        11
    """
    t1, t2 = binary_args(t1, t2, "dot")
    if t1.rank not in (1, 2) or t2.rank not in (1, 2):
        raise ShapeError(f"Error in dot: inputs must all be rank 1 or 2, but got ranks "
                         f"{t1.rank} and {t2.rank}.")
    n1 = t1.shape[-1]
    n2 = t2.shape[0]
    if n1 != n2:
        raise ShapeError(f"Error in dot: inner dimensions of inputs must match, but got {n1} "
                         f"and {n2}.")
    if t1.rank == 1 and t2.rank == 1:
        return reshape(mat_mul(reshape(t1, (1, n1)), reshape(t2, (n2, 1))), ())
    if t1.rank == 1:
        return reshape(mat_mul(reshape(t1, (1, n1)), t2), (t2.shape[1],))
    if t2.rank == 1:
        return reshape(mat_mul(t1, reshape(t2, (n2, 1))), (t1.shape[0],))
    return mat_mul(t1, t2)


@export
def outer_product(v1, v2):
    """The matrix v1[i]·v2[j] of two vectors.

    >>> import flowgrad as tf
    >>> tf.outer_product(tf.tensor([1, 2]), tf.tensor([3, 4])).print()
    Tensor
        [[3, 4],
         [6, 8]]
    """
    v1, v2 = binary_args(v1, v2, "outer_product")
    if v1.rank != 1 or v2.rank != 1:
        raise ShapeError(f"Error in outerProduct: inputs must be rank 1, but got ranks "
                         f"{v1.rank} and {v2.rank}.")
    return mat_mul(reshape(v1, (v1.shape[0], 1)), reshape(v2, (1, v2.shape[0])))

