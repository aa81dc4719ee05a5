"""Linear algebra: mat_mul (batched, broadcasting batch axes, optional transposes), dot,
outer_product, einsum (differentiable, '...' and diagonals), and tf.linalg's qr and
gram_schmidt, both differentiable (TF.js's are not).
"""
import string

from .. import batching as V
from .. import dtypes
from .. import engine as E
from ..errors import ArgumentError, GradientError, LinAlgError, ShapeError
from ._core import (as_float, as_numeric, batch_axes_broadcast, binary_args, cast, export,
                    flag, met_float, primitive)
from .creation import eye, ones, zeros
from .matrices import triangular_solve, tril
from .reduce import norm
from .shape import concat, reshape, stack, transpose, unstack


# (its rules broadcast over leading axes)
@primitive("BatchMatMul", batched_vjp=True, vmap=V.mat_mul)
def _mat_mul(B, a, b, transpose_a, transpose_b):
    # B.mT: matrix_transpose, without its Python layers on NumPy (backends/ext_nn.py)
    if transpose_a:
        a = B.mT(a)
    if transpose_b:
        b = B.mT(b)
    return B.matmul(a, b)


@_mat_mul.def_vjp
def _(dy, a, b, transpose_a, transpose_b, needs):
    # (the kernel itself: these operands are checked already, and mat_mul's checks would
    # cost a backward pass ~3 us a product)
    da = db = None
    if not transpose_a and not transpose_b:
        da = _product(dy, b, False, True) if needs[0] else None
        db = _product(a, dy, True, False) if needs[1] else None
    elif not transpose_a:
        da = _product(dy, b, False, False) if needs[0] else None
        db = _product(dy, a, True, False) if needs[1] else None
    elif not transpose_b:
        da = _product(b, dy, False, True) if needs[0] else None
        db = _product(a, dy, False, False) if needs[1] else None
    else:
        da = _product(b, dy, True, True) if needs[0] else None
        db = _product(dy, a, True, True) if needs[1] else None
    return da, db


def _product(a, b, transpose_a, transpose_b):
    return E.run_kernel(_mat_mul, (a, b), {"transpose_a": transpose_a,
                                           "transpose_b": transpose_b})


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
    transpose_a = flag(transpose_a, "transpose_a", "mat_mul")
    transpose_b = flag(transpose_b, "transpose_b", "mat_mul")
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
    if not batch_axes_broadcast(ba, bb):
        raise ShapeError(f"Error in matMul: the batch dimensions {ba} and {bb} of shapes "
                         f"{a.shape} and {b.shape} do not broadcast.")
    return E.run_kernel(_mat_mul, (a, b), {"transpose_a": transpose_a,
                                           "transpose_b": transpose_b})


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



# ---------------------------------------------------------------- einsum

_LABELS = string.ascii_letters


def _einsum_plan(equation, shapes):
    """The canonical equation for operands of ``shapes``: letters only, explicit output,
    '...' replaced by unused letters (right-aligned: its axes broadcast as in NumPy).
    Checks the labels' lengths on the way."""
    if not isinstance(equation, str):
        raise ArgumentError(f"einsum: equation must be a string like 'ij,jk->ik', got "
                            f"{type(equation).__name__}")
    if "." in equation.replace("...", ""):
        raise ArgumentError(f"einsum: the subscripts {equation!r} hold a '.' that is not part "
                            f"of an ellipsis: write '...' (three dots, no spaces) for the "
                            f"broadcast axes")
    eq = "".join(equation.split())
    if eq.count("->") > 1:
        raise ArgumentError(f'einsum: Equation must contain exactly one arrow ("->"), got '
                            f'{equation!r}')
    lhs, out = eq.split("->") if "->" in eq else (eq, None)
    terms = lhs.split(",")
    if len(terms) != len(shapes):
        raise ArgumentError(f"einsum: Expected {len(terms)} input tensors, received "
                            f"{len(shapes)} (equation {equation!r})")
    for t in terms + ([out] if out is not None else []):
        if any(c not in _LABELS for c in t.replace("...", "", 1)):
            raise ArgumentError(f"einsum: invalid subscripts {t!r} in {equation!r}: use the "
                                f"letters a-z and A-Z, and at most one '...' per operand")
    free = [c for c in _LABELS if c not in eq]
    ells = []
    for i, (t, s) in enumerate(zip(terms, shapes)):
        named = len(t) - 3 * ("..." in t)
        if len(s) != named and not ("..." in t and len(s) > named):
            raise ShapeError(f"einsum: operand {i} has shape {list(s)} (rank {len(s)}) but its "
                             f"subscripts {t!r} name {named} axes" +
                             ("" if "..." in t else "; add '...' to broadcast over the rest"))
        ells.append(len(s) - named)
    nell = max(ells, default=0)
    if nell > len(free):
        raise ArgumentError(f"einsum: {equation!r} needs more than {len(_LABELS)} labels")
    ell = "".join(free[:nell])
    terms = [t.replace("...", ell[nell - k:]) for t, k in zip(terms, ells)]
    sizes = {}
    for i, (t, s) in enumerate(zip(terms, shapes)):
        mine = {}
        for c, n in zip(t, s):
            if mine.setdefault(c, n) != n:
                raise ShapeError(f"einsum: label '{c}' has size {mine[c]} in one operand and "
                                 f"{n} in operand {i} (shape {list(s)}): a label repeated in "
                                 f"an operand takes a diagonal, so its axes must have one "
                                 f"length (equation {equation!r})")
            old = sizes.setdefault(c, n)
            if old == n:
                continue
            if 1 in (old, n):       # a length-1 axis broadcasts across operands (NumPy's rule)
                sizes[c] = max(old, n)
            elif c in ell:
                raise ShapeError(f"einsum: the '...' axes of the operands do not broadcast "
                                 f"(shapes {[list(x) for x in shapes]}, equation {equation!r})")
            else:
                raise ShapeError(f"einsum: label '{c}' has size {old} in one operand and {n} "
                                 f"in operand {i} (shape {list(s)}): a label names one length "
                                 f"(equation {equation!r}) or 1, which broadcasts")
    if out is None:      # implicit output: '...' then the labels used once, sorted
        once = "".join(terms)
        out = ell + "".join(sorted(c for c in set(once) if once.count(c) == 1 and c not in ell))
    else:
        for c in out.replace("...", ""):
            if c not in lhs:
                raise ArgumentError(f"einsum: Output subscripts contain the label {c} not "
                                    f"present in the input subscripts.")
        if len(set(out)) != len(out.replace("...", ".")):
            raise ArgumentError(f"einsum: the output subscripts {out!r} repeat a label")
        # NOTE: '...' axes missing from the output are summed, like any other label
        out = out.replace("...", ell)
    return ",".join(terms) + "->" + out


@primitive("Einsum", batched_vjp=True)
def _einsum(B, *operands, equation):
    return B.einsum(equation, *operands)      # an extension: see backends/ext_nn.py


@_einsum.def_vmap
def _(prim, inputs, attrs, levels):
    """tf.vmap of einsum: one fresh label per vmap level, leading in every term (absent
    levels broadcast)."""
    eq = attrs["equation"]
    if "..." in eq:
        return V.loop(prim, inputs, attrs, levels)
    free = [c for c in _LABELS if c not in eq][:len(levels)]
    lead = "".join(free)
    lhs, out = eq.split("->")
    batched = ",".join(lead + t for t in lhs.split(",")) + "->" + lead + out
    sizes = V.sizes_of(inputs, levels)
    return E.B.einsum(batched, *[V.full(t, levels, sizes) for t in inputs])


@_einsum.def_vjp
def _(dy, *operands, equation, needs):
    # The gradient of operand k is an einsum of dy with the other operands, onto k's labels.
    lhs, out = equation.split("->")
    terms = lhs.split(",")
    free = iter(c for c in _LABELS if c not in equation)
    lead = "".join(next(free) for _ in range(dy.rank - len(out)))   # vectorised passes
    grads = []
    for k, term in enumerate(terms):
        if not needs[k]:
            grads.append(None)
            continue
        ops = [dy] + [a for j, a in enumerate(operands) if j != k]
        subs = [lead + out] + [t for j, t in enumerate(terms) if j != k]
        target = ""
        for c, n in zip(term, operands[k].shape):
            if c in target:       # a repeated label (a diagonal): scatter onto it
                d = next(free)
                target += d
                ops.append(eye(n, dtype=dy.dtype))
                subs.append(c + d)
            else:
                target += c
        # the length each label has among the other factors (1 where they broadcast it)
        have = {}
        for t, a in zip(subs, ops):
            for c, n in zip(t, a.shape):
                have[c] = max(have.get(c, 1), n)
        for c, n in zip(term, operands[k].shape):
            if c not in have or have[c] < n:
                # summed in operand k alone, or broadcast from length 1 by the others:
                # dy spreads along it
                ops.append(ones([n], dy.dtype))
                subs.append(c)
                have[c] = n
        # straight to the kernel: the equation is canonical and its '...' labels may
        # broadcast (length 1 against n), which the public einsum allows only for '...'
        grads.append(E.run_kernel(_einsum, tuple(ops),
                                  {"equation": ",".join(subs) + "->" + lead + target}))
    return grads


@export(method=False)
def einsum(equation, *tensors):
    """Tensor contraction in Einstein notation, as NumPy's ``einsum``, and differentiable.

    Labels name axes; a label missing from the output is summed; a label repeated within
    one operand takes its diagonal; ``...`` stands for the remaining axes, which broadcast
    across operands as in NumPy (right-aligned; a length-1 axis, named or not, stretches to
    the length its label has elsewhere). Without ``->`` the output is ``...`` then the
    labels used once, sorted. Unlike NumPy, '...' axes left out of an explicit output are
    summed rather than refused. Beyond TF.js (whose einsum has no gradient, takes at most two
    operands and no ``...``).

    >>> import flowgrad as tf
    >>> a = tf.tensor([[1, 2], [3, 4]])
    >>> tf.einsum("ij,jk->ik", a, a).print()
    Tensor
        [[7 , 10],
         [15, 22]]
    >>> tf.einsum("ii", a).print()
    Tensor
        5
    >>> tf.einsum("...ij,...jk->...ik", tf.ones([5, 2, 3]), tf.ones([3, 4])).shape
    (5, 2, 4)
    """
    if not tensors:
        raise ArgumentError(f"einsum: no input tensors given for {equation!r}")
    like = met_float(*tensors)
    ts = [as_numeric(t, "einsum", f"tensors[{i}]", like) for i, t in enumerate(tensors)]
    dt = ts[0].dtype
    for t in ts[1:]:
        dt = dtypes.promote(dt, t.dtype, "einsum")
    ts = tuple(t if t.dtype == dt else cast(t, dt) for t in ts)
    eq = _einsum_plan(equation, [t.shape for t in ts])
    return E.run_kernel(_einsum, ts, {"equation": eq})


# ---------------------------------------------------------------- QR

def _mT(x):
    """x with its last two axes swapped."""
    perm = list(range(x.rank))
    perm[-2:] = perm[-1], perm[-2]
    return transpose(x, perm)


@primitive("Qr", multi=True, save_y=True, vmap=V.leading)
def _qr(B, x, full_matrices):
    # TF.js's signs (backends/ext_nn.py): each r[j, j] opposite to its Householder pivot
    return B.householder_qr(x, full_matrices)


def _solve_right_t(c, r):
    """c·r⁻ᵀ for r upper triangular (invertible): (r⁻¹·cᵀ)ᵀ, a triangular solve."""
    return _mT(triangular_solve(r, _mT(c), lower=False))


def _qr_grad_tall(q, r, dq, dr):
    # The reduced QR backward for m >= n (r square, invertible):
    #   dx = (dq + q·copyltu(M))·r⁻ᵀ with M = r·drᵀ - dqᵀ·q,
    # written as TF's QrGrad does: q·(dr + tril(qᵀdq - dqᵀq + r drᵀ - dr rᵀ)·r⁻ᵀ)
    #   + (dq - q·qᵀdq)·r⁻ᵀ; the second term is the part of dq outside q's span.
    qdq = mat_mul(q, dq, True, False)
    rdr = mat_mul(r, dr, False, True)
    low = tril(qdq - _mT(qdq) + rdr - _mT(rdr))
    return mat_mul(q, dr + _solve_right_t(low, r)) + _solve_right_t(dq - mat_mul(q, qdq), r)


@primitive("QrCompleteColumns", batched_vjp=True, vmap=V.leading)
def _q_head(B, dq, n):
    """The first n columns of the gradient dq of a complete q (m x m, m > n), checked to
    have nothing in the others: a kernel, so that the check also runs in tf.jit's replays
    (and on every example of a tf.vmap) without reading a value into Python."""
    m = dq.shape[-1]
    if B.any(dq[..., :, n:] != 0):
        raise GradientError(
            f"qr(x, full_matrices=True) of a {m}x{n} matrix (m > n) is not differentiable "
            f"with respect to q's last {m - n} columns: they are any orthonormal basis of "
            f"the complement of x's columns, not a function of x. Use full_matrices=False "
            f"(q of shape [{m}, {n}]), or use only q's first {n} columns.")
    return B.asarray(dq[..., :, :n], copy=True)


@_q_head.def_vjp
def _(g, dq, n):
    return concat([g, zeros(list(g.shape[:-1]) + [dq.shape[-1] - n], g.dtype)], -1)


@_qr.def_vjp
def _(dys, x, q, r, full_matrices):
    dq, dr = dys
    m, n = x.shape[-2:]
    if full_matrices and m > n:
        # the last m - n columns of a full q are any orthonormal basis of the complement of
        # x's columns: not a function of x. Only r and q's first n columns are (r's last
        # m - n rows are zeros).
        dq = E.run_kernel(_q_head, (dq,), {"n": n})
        q, r, dr = q[..., :, :n], r[..., :n, :], dr[..., :n, :]
    try:
        if m >= n:
            return _qr_grad_tall(q, r, dq, dr)
        # wide: x = [a | b] with a square; q, u = qr(a) and v = qᵀb (TF's QrGrad)
        b, u = x[..., :, m:], r[..., :, :m]
        du, dv = dr[..., :, :m], dr[..., :, m:]
        da = _qr_grad_tall(q, u, dq + mat_mul(b, dv, False, True), du)
        return concat([da, mat_mul(q, dv)], -1)
    except LinAlgError as e:
        k = min(m, n)
        raise GradientError(
            f"qr(x) of a {m}x{n} matrix has no gradient here: x's first {k} columns are "
            f"linearly dependent (r has a zero on its diagonal), where q is not unique. "
            f"Keep them independent (e.g. add a small random perturbation).") from e


@export(namespace="linalg")
def qr(x, full_matrices=False):
    """The QR decomposition x = q·r of a matrix (or a batch: the last two axes), by
    Householder reflections: q has orthonormal columns, r is upper triangular.

    For x of shape [..., m, n] and k = min(m, n): q is [..., m, k] and r [..., k, n], or
    with ``full_matrices=True`` q is [..., m, m] and r [..., m, n]. Signs follow TF.js
    (each r[j, j] has the sign opposite to its Householder pivot). Differentiable, unlike
    TF.js's, for every shape except the extra columns of a full q when m > n.

    >>> import flowgrad as tf
    >>> q, r = tf.linalg.qr(tf.tensor([[3.0, 1.0], [4.0, 7.0]], dtype="float64"))
    >>> r.print()
    Tensor
        [[-5, -6.2],
         [0 , -3.4]]
    >>> bool(tf.mat_mul(q, r).sub([[3, 1], [4, 7]]).abs().max() < 1e-12)
    True
    """
    x = as_float(x, "qr")
    if x.rank < 2:
        raise ShapeError(f"qr() requires input tensor to have a rank >= 2, but got rank "
                         f"{x.rank}")
    return E.run_kernel(_qr, (x,), {"full_matrices": flag(full_matrices, "full_matrices",
                                                          "qr")})


@export(namespace="linalg")
def gram_schmidt(xs):
    """Orthonormalize vectors by the (modified) Gram-Schmidt process, in order.

    ``xs``: a list of 1-D tensors of one length (returns a list) or a 2-D tensor whose rows
    are the vectors (returns a 2-D tensor). Differentiable.

    >>> import flowgrad as tf
    >>> tf.linalg.gram_schmidt(tf.tensor([[3.0, 4.0], [1.0, 0.0]])).print()
    Tensor
        [[0.6, 0.8 ],
         [0.8, -0.6]]
    """
    if isinstance(xs, (list, tuple)):
        if not xs:
            raise ArgumentError("Gram-Schmidt process: input must not be null, undefined, "
                                "or empty")
        vs = [as_float(v, "gram_schmidt", f"xs[{i}]") for i, v in enumerate(xs)]
        for i, v in enumerate(vs):
            if v.rank != 1:
                raise ShapeError(f"Gram-Schmidt: xs[{i}] must be a 1-D tensor, got shape "
                                 f"{list(v.shape)}")
            if v.shape[0] != vs[0].shape[0]:
                raise ShapeError(f"Gram-Schmidt: Non-unique lengths found in the input "
                                 f"vectors: ({v.shape[0]} vs. {vs[0].shape[0]})")
        rows = False
    else:
        x = as_float(xs, "gram_schmidt", "xs")
        if x.rank != 2:
            raise ShapeError(f"Gram-Schmidt: xs must be a list of 1-D tensors or a 2-D "
                             f"tensor, got a tensor of rank {x.rank}")
        if x.shape[0] == 0:
            raise ArgumentError(f"Gram-Schmidt process: input must not be null, undefined, "
                                f"or empty (got a tensor of shape {list(x.shape)})")
        vs, rows = unstack(x, 0), True
    if len(vs) > vs[0].shape[0]:
        raise ShapeError(f"Gram-Schmidt: Number of vectors ({len(vs)}) exceeds number of "
                         f"dimensions ({vs[0].shape[0]}).")
    ys = []
    for v in vs:
        for y in ys:          # modified Gram-Schmidt: project out of the updated v
            v = v - (y * v).sum() * y
        ys.append(v / norm(v))
    return stack(ys, 0) if rows else ys
