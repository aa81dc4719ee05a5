"""conv2d, max_pool and avg_pool forward + backward against hand-written NumPy.

Workload: x [32, 32, 32, 16] float32, a 3x3 filter to 32 channels, stride 1, 'same'
padding, an upstream gradient dy of the output's shape. Both sides compute y, dx and dw.
The NumPy floor is the textbook im2col: a padded strided view copied into columns and one
matmul for y; dy @ w^T and a col2im of strided adds for dx; columns^T @ dy for dw. A tuned
variant does the col2im channels first, as flowgrad does.

Pooling: the same x, 3x3 windows, stride 1, 'same' padding; forward and dx. The floor
reduces the 9 shifted slices of the padded input (max, or sum / window counts) and, for
max, sends dy to each window's first maximum with one masked add per window cell.

Single-threaded BLAS (OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1, set here before NumPy
loads) so the figures measure the code, not the core count. Median of REPS runs.

    python -m bench.conv
"""
import os

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import statistics  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

import flowgrad as tf  # noqa: E402

N, H, W, C, O, K = 32, 32, 32, 16, 32, 3
REPS = 11


def numpy_conv_fwd_bwd(x, w, dy):
    """y = conv2d(x, w, 'same'), dx, dw: im2col + matmul, by hand."""
    p = K // 2
    xp = np.pad(x, ((0, 0), (p, p), (p, p), (0, 0)))
    st = xp.strides
    view = np.lib.stride_tricks.as_strided(
        xp, (N, H, W, K, K, C), (st[0], st[1], st[2], st[1], st[2], st[3]), writeable=False)
    cols = view.reshape(N * H * W, K * K * C)                       # im2col (a copy)
    y = (cols @ w.reshape(K * K * C, O)).reshape(N, H, W, O)
    dy2 = dy.reshape(N * H * W, O)
    dw = (cols.T @ dy2).reshape(K, K, C, O)
    dcols = (dy2 @ w.reshape(K * K * C, O).T).reshape(N, H, W, K, K, C)
    dxp = np.zeros_like(xp)
    for i in range(K):                                              # col2im
        for j in range(K):
            dxp[:, i:i + H, j:j + W] += dcols[:, :, :, i, j]
    return y, dxp[:, p:p + H, p:p + W], dw


def numpy_tuned_fwd_bwd(x, w, dy):
    """The same, with the col2im done channels first (dx's rows are whole image rows, so
    each strided add moves longer contiguous runs): the best hand version we know."""
    p = K // 2
    xp = np.pad(x, ((0, 0), (p, p), (p, p), (0, 0)))
    st = xp.strides
    view = np.lib.stride_tricks.as_strided(
        xp, (N, H, W, K, K, C), (st[0], st[1], st[2], st[1], st[2], st[3]), writeable=False)
    cols = view.reshape(N * H * W, K * K * C)
    y = (cols @ w.reshape(K * K * C, O)).reshape(N, H, W, O)
    dy2 = dy.reshape(N * H * W, O)
    dw = (cols.T @ dy2).reshape(K, K, C, O)
    dcols = (w.reshape(K * K * C, O) @ dy2.T).reshape(K, K, C, N, H, W)
    dxp = np.zeros((C, N, H + 2 * p, W + 2 * p), np.float32)
    for i in range(K):
        for j in range(K):
            dxp[:, :, i:i + H, j:j + W] += dcols[i, j]
    dx = np.ascontiguousarray(np.moveaxis(dxp[:, :, p:p + H, p:p + W], 0, -1))
    return y, dx, dw


def _shifts(p):
    return [(i, j) for i in range(p) for j in range(p)]


def numpy_max_pool_fwd_bwd(x, dy):
    p = K // 2
    xp = np.pad(x, ((0, 0), (p, p), (p, p), (0, 0)), constant_values=-np.inf)
    y = xp[:, :H, :W].copy()
    for i, j in _shifts(K)[1:]:
        np.maximum(y, xp[:, i:i + H, j:j + W], out=y)
    dxp = np.zeros_like(xp)
    taken = np.zeros(y.shape, bool)
    for i, j in _shifts(K):
        m = (xp[:, i:i + H, j:j + W] == y) & ~taken
        taken |= m
        dxp[:, i:i + H, j:j + W] += np.where(m, dy, 0)
    return y, dxp[:, p:p + H, p:p + W]


def numpy_avg_pool_fwd_bwd(x, dy):
    p = K // 2
    xp = np.pad(x, ((0, 0), (p, p), (p, p), (0, 0)))
    cnt = np.pad(np.ones((1, H, W, 1), x.dtype), ((0, 0), (p, p), (p, p), (0, 0)))
    s = xp[:, :H, :W].copy()
    c = cnt[:, :H, :W].copy()
    for i, j in _shifts(K)[1:]:
        s += xp[:, i:i + H, j:j + W]
        c += cnt[:, i:i + H, j:j + W]
    y = s / c
    g = dy / c
    dxp = np.zeros_like(xp)
    for i, j in _shifts(K):
        dxp[:, i:i + H, j:j + W] += g
    return y, dxp[:, p:p + H, p:p + W]


def flowgrad_pool_fwd_bwd(fn):
    """y = fn(x, 3, 1, 'same') and dx, the way a user writes it."""
    return lambda x, dy: tf.value_and_grad(lambda a: fn(a, K, 1, "same"))(x, dy)


def flowgrad_conv_fwd_bwd(x, w, dy):
    value, (dx, dw) = tf.value_and_grads(lambda a, b: tf.conv2d(a, b, 1, "same"))([x, w], dy)
    return value, dx, dw


def median_time(fn, *args):
    fn(*args)                                                       # warm up
    times = []
    for _ in range(REPS):
        t0 = time.perf_counter()
        out = fn(*args)
        times.append(time.perf_counter() - t0)
        del out
    return statistics.median(times)


def main():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((N, H, W, C)).astype(np.float32)
    w = rng.standard_normal((K, K, C, O)).astype(np.float32)
    dy = rng.standard_normal((N, H, W, O)).astype(np.float32)
    tx, tw, tdy = tf.tensor(x), tf.tensor(w), tf.tensor(dy)

    # same results first: the comparison is of equal work
    ref = numpy_conv_fwd_bwd(x, w, dy)
    got = flowgrad_conv_fwd_bwd(tx, tw, tdy)
    for r, g, t in zip(ref, got, numpy_tuned_fwd_bwd(x, w, dy)):
        np.testing.assert_allclose(g.numpy(), r, rtol=1e-4, atol=1e-3)
        np.testing.assert_allclose(t, r, rtol=1e-4, atol=1e-3)

    t_np = median_time(numpy_conv_fwd_bwd, x, w, dy)
    t_tuned = median_time(numpy_tuned_fwd_bwd, x, w, dy)
    t_fg = median_time(flowgrad_conv_fwd_bwd, tx, tw, tdy)
    print(f"conv2d {N}x{H}x{W}x{C} -> {O} channels, {K}x{K}, 'same', float32, "
          f"forward + dx + dw, median of {REPS}, "
          f"OMP_NUM_THREADS={os.environ['OMP_NUM_THREADS']} "
          f"OPENBLAS_NUM_THREADS={os.environ['OPENBLAS_NUM_THREADS']}")
    print(f"  numpy, textbook im2col + matmul     : {t_np * 1e3:8.2f} ms")
    print(f"  numpy, tuned (channels-first col2im): {t_tuned * 1e3:8.2f} ms")
    print(f"  flowgrad                            : {t_fg * 1e3:8.2f} ms")
    print(f"  ratio flowgrad / numpy textbook     : {t_fg / t_np:8.2f}")
    print(f"  ratio flowgrad / numpy tuned        : {t_fg / t_tuned:8.2f}")

    dyp = rng.standard_normal((N, H, W, C)).astype(np.float32)
    print(f"pooling {N}x{H}x{W}x{C}, {K}x{K}, stride 1, 'same', float32, forward + dx, "
          f"median of {REPS}")
    for name, floor, fn in (("max_pool", numpy_max_pool_fwd_bwd, tf.max_pool),
                            ("avg_pool", numpy_avg_pool_fwd_bwd, tf.avg_pool)):
        fg = flowgrad_pool_fwd_bwd(fn)
        for r, g in zip(floor(x, dyp), fg(tx, tf.tensor(dyp))):
            np.testing.assert_allclose(g.numpy(), r, rtol=1e-5, atol=1e-5)
        t_np = median_time(floor, x, dyp)
        t_fg = median_time(fg, tx, tf.tensor(dyp))
        print(f"  {name}: numpy {t_np * 1e3:7.2f} ms, flowgrad {t_fg * 1e3:7.2f} ms, "
              f"ratio {t_fg / t_np:5.2f}")


if __name__ == "__main__":
    main()
