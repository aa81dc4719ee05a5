"""A seeded fuzz test of the public API: every op of the table, the gradient functions,
optimizers, clipping, schedules and creation functions get bad arguments — wrong types, NaN
and inf, empty and 0-d tensors, huge sizes, disposed tensors, arrays where scalars are
expected — one argument at a time, the others valid. The only acceptable outcomes are a
result or a FlowgradError whose message names the op or the argument; a bare Python or
NumPy exception, a silently truncated int argument or a disposed tensor passing through is
a failure. The default run samples a few bad values per argument; ``-m slow`` tries them
all."""
import inspect
import random
import time

import numpy as np
import pytest

import flowgrad as tf
from flowgrad.errors import FlowgradError
from flowgrad.ops import NAMESPACES, OPS


def _t(shape, dtype="float32", start=1):
    n = int(np.prod(shape)) if shape else 1
    return tf.keep(tf.tensor((np.arange(start, start + n) / (n + 1)).reshape(shape),
                             dtype=dtype))


def _i(values):
    return tf.keep(tf.tensor(values, dtype="int32"))


X = _t((2, 3))
V = _t((3,))
M = _t((2, 2))
BOOL = tf.keep(tf.tensor([[True, False, True], [False, True, True]]))
IMG = _t((1, 4, 4, 2))
VOL = _t((1, 4, 4, 4, 2))
LSTM_K, LSTM_B = _t((5, 12)), _t((12,))
D1, C1 = _t((1, 2)), _t((1, 3))


def _cell(data, c, h):
    return tf.basic_lstm_cell(1.0, LSTM_K, LSTM_B, data, c, h)


# a valid call of each op: name -> (args, kwargs); ops of one or two plain tensors are
# filled in from their signature
BASE = {
    "add_n": ([[X, X]], {}), "all": ([BOOL], {}), "any": ([BOOL], {}),
    "avg_pool": ([IMG, 2, 1, "same"], {}), "max_pool": ([IMG, 2, 1, "same"], {}),
    "avg_pool3d": ([VOL, 2, 1, "same"], {}), "max_pool3d": ([VOL, 2, 1, "same"], {}),
    "basic_lstm_cell": ([1.0, LSTM_K, LSTM_B, D1, C1, C1], {}),
    "multi_rnn_cell": ([[_cell], D1, [C1], [C1]], {}),
    "batch_norm": ([X, V, V], {}), "batch_norm2d": ([X, V, V], {}),
    "batch_norm3d": ([_t((1, 2, 3)), V, V], {}), "batch_norm4d": ([_t((1, 2, 2, 3)), V, V], {}),
    "batch_to_space_nd": ([_t((4, 1, 1, 1)), [2, 2], [[0, 0], [0, 0]]], {}),
    "space_to_batch_nd": ([_t((1, 2, 2, 1)), [2, 2], [[0, 0], [0, 0]]], {}),
    "bincount": ([_i([0, 1, 1, 2]), None, 3], {}),
    "dense_bincount": ([_i([0, 1, 1, 2]), None, 3], {}),
    "bitwise_and": ([_i([1, 3]), _i([2, 3])], {}),
    "broadcast_to": ([V, [2, 3]], {}), "cast": ([X, "int32"], {}),
    "clip_by_value": ([X, 0.1, 0.5], {}), "concat": ([[X, X], 0], {}),
    "conv1d": ([_t((1, 4, 2)), _t((2, 2, 3)), 1, "same"], {}),
    "conv2d": ([IMG, _t((2, 2, 2, 3)), 1, "same"], {}),
    "conv2d_transpose": ([_t((1, 4, 4, 3)), _t((2, 2, 2, 3)), [1, 4, 4, 2], 1, "same"], {}),
    "conv3d": ([VOL, _t((2, 2, 2, 2, 3)), 1, "same"], {}),
    "conv3d_transpose": ([_t((1, 4, 4, 4, 3)), _t((2, 2, 2, 2, 3)), [1, 4, 4, 4, 2], 1,
                          "same"], {}),
    "depth_to_space": ([_t((1, 1, 1, 4)), 2], {}),
    "space_to_depth": ([_t((1, 2, 2, 1)), 2], {}),
    "depthwise_conv2d": ([IMG, _t((2, 2, 2, 1)), 1, "same"], {}),
    "separable_conv2d": ([IMG, _t((2, 2, 2, 1)), _t((1, 1, 2, 3)), 1, "same"], {}),
    "diag": ([V], {}), "dot": ([M, M], {}), "dropout": ([X, 0.5], {"seed": 1}),
    "einsum": (["ij,jk->ik", M, M], {}), "eye": ([3], {}), "fill": ([[2, 3], 1.0], {}),
    "from_dlpack": ([np.ones(3)], {}), "from_numpy": ([np.ones(3)], {}),
    "gather": ([X, _i([0, 1]), 1], {}), "gather_nd": ([X, _i([[0, 1]])], {}),
    "linspace": ([0, 1, 5], {}), "local_response_normalization": ([IMG], {}),
    "lower_bound": ([V, _t((2,))], {}), "upper_bound": ([V, _t((2,))], {}),
    "search_sorted": ([V, _t((2,))], {}), "mat_mul": ([M, M], {}),
    "meshgrid": ([V, V], {}), "mirror_pad": ([M, [[1, 1], [1, 1]]], {}),
    "one_hot": ([_i([0, 2]), 3], {}), "ones": ([[2, 3]], {}), "zeros": ([[2, 3]], {}),
    "outer_product": ([V, V], {}), "pad": ([M, [[1, 1], [1, 1]]], {}),
    "pool": ([IMG, [2, 2], "avg", "same"], {}), "dilation2d": ([IMG, _t((2, 2, 2)), 1, "same"], {}),
    "random_normal": ([[2, 3]], {"seed": 1}), "random_uniform": ([[2, 3]], {"seed": 1}),
    "truncated_normal": ([[2, 3]], {"seed": 1}), "range": ([0, 5], {}),
    "reshape": ([X, [3, 2]], {}), "reverse": ([X, 0], {}), "scalar": ([1.0], {}),
    "scatter_nd": ([_i([[0], [2]]), _t((2,)), [4]], {}),
    "slice": ([X, [0, 0], [1, 2]], {}), "split": ([X, 3, 1], {}), "stack": ([[X, X]], {}),
    "squeeze": ([_t((1, 3))], {}), "strided_slice": ([X, [0, 0], [2, 3]], {}),
    "tensor": ([[1, 2, 3]], {}), "tensor1d": ([[1, 2]], {}), "tensor2d": ([[[1, 2]]], {}),
    "tensor3d": ([[[[1]]]], {}), "tensor4d": ([[[[[1]]]]], {}),
    "tensor5d": ([[[[[[1]]]]]], {}), "tensor6d": ([[[[[[[1]]]]]]], {}),
    "tensor_scatter_update": ([_t((4,)), _i([[0]]), _t((1,))], {}),
    "tile": ([X, [2, 1]], {}), "top_k": ([V, 2], {}), "transpose": ([X, [1, 0]], {}),
    "unsorted_segment_sum": ([V, _i([0, 1, 0]), 2], {}), "where": ([BOOL, X, X], {}),
    "cosine_distance": ([X, X, 1], {}),
    "resize_bilinear": ([IMG, [3, 3]], {}), "resize_nearest_neighbor": ([IMG, [3, 3]], {}),
    "grayscale_to_rgb": ([_t((1, 2, 2, 1))], {}), "rgb_to_grayscale": ([_t((1, 2, 2, 3))], {}),
    "band_part": ([M, 1, 1], {}), "gram_schmidt": ([M], {}), "flip_left_right": ([IMG], {}),
    "logical_and": ([BOOL, BOOL], {}), "logical_or": ([BOOL, BOOL], {}),
    "logical_xor": ([BOOL, BOOL], {}), "logical_not": ([BOOL], {}),
}
SKIP = {"Reduction"}    # an enum, not a function


# ---------------------------------------------------------------- the rest of the API
def _sq(v):
    return (v * v).sum()


def grad(f, x, dy=None):
    return tf.grad(f)(x, dy)


def grads(f, args, dy=None):
    return tf.grads(f)(args, dy)


def value_and_grad(f, x, dy=None):
    return tf.value_and_grad(f)(x, dy)


def value_and_grads(f, args, dy=None):
    return tf.value_and_grads(f)(args, dy)


def jacobian(f, x, argnums=0, mode="rev"):
    return tf.jacobian(f, argnums, mode)(x)


def hessian(f, x, argnums=0):
    return tf.hessian(f, argnums)(x)


def hvp(f, x, v, argnums=0):
    return tf.hvp(f, argnums)(x, v)


def jvp(f, primals, tangents):
    return tf.jvp(f, primals, tangents)


def vjp(f, x, cotangent):
    return tf.vjp(f, x)[1](cotangent)


def custom_grad(f, x):
    return tf.custom_grad(f)(x)


def _custom(x, save):
    return {"value": x * 2, "grad_func": lambda dy, saved: [dy * 2]}


def variable_grads(f, var_list=None):
    w = tf.variable(V)
    try:
        return tf.variable_grads((lambda: _sq(w)) if _is(f, "loss") else f, var_list)
    finally:
        w.dispose()


def variable(initial_value, trainable=True, name=None, dtype=None):
    v = tf.variable(initial_value, trainable, name, dtype)
    v.dispose()


def assign(value):
    v = tf.variable(V)
    try:
        v.assign(value)
    finally:
        v.dispose()


def _optimizer_call(make):
    """tf.train.<name>(...) with its clipping keywords as parameters of their own."""
    sig = inspect.signature(make)
    ps = [p for p in sig.parameters.values() if p.kind is not p.VAR_KEYWORD]
    ps += [inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, default=None)
           for n in ("clip_value", "clip_norm", "global_clip_norm")]

    def call(*a, **k):
        make(*a, **k).dispose()
    call.__signature__ = sig.replace(parameters=ps)
    call.__name__ = make.__name__
    return call


def _is(arg, name):
    return isinstance(arg, str) and arg == name


def _train(method):
    """An optimizer method on a fresh variable; the base arguments are the strings below."""
    def call(arg, skip_nonfinite=False):
        w = tf.variable(V)
        opt = tf.train.adam(0.1)
        try:
            if method == "minimize":
                return opt.minimize((lambda: _sq(w)) if _is(arg, "loss") else arg,
                                    skip_nonfinite=skip_nonfinite, var_list=[w])
            if method == "apply_gradients":
                return opt.apply_gradients({w: V} if _is(arg, "grads") else arg, skip_nonfinite)
            return opt.set_weights(opt.get_weights() if _is(arg, "weights") else arg)
        finally:
            opt.dispose()
            w.dispose()
    call.__name__ = method
    return call


def tidy(fn):
    return tf.tidy(fn)


EXTRA = {
    grad: ([_sq, X], {}), grads: ([lambda a, b: (a * b).sum(), [X, X]], {}),
    value_and_grad: ([_sq, X], {}), value_and_grads: ([lambda a: _sq(a), [X]], {}),
    jacobian: ([lambda v: v * v, V], {}), hessian: ([_sq, V], {}),
    hvp: ([_sq, V, V], {}), jvp: ([lambda v: v * v, [V], [V]], {}),
    vjp: ([lambda v: v * v, V, V], {}), custom_grad: ([_custom, V], {}),
    variable_grads: (["loss"], {}),
    variable: ([V], {}), assign: ([V], {}), tidy: ([lambda: X * 2], {}),
    tf.clip_by_norm: ([X, 1.0], {}), tf.clip_by_global_norm: ([[X, V], 1.0], {}),
    tf.global_norm: ([[X, V]], {}),
    tf.train.exponential_decay: ([0.1, 10, 0.5], {}),
    tf.train.cosine_decay: ([0.1, 10], {}),
    tf.train.piecewise_constant: ([[10], [0.1, 0.01]], {}),
    tf.train.warmup: ([0.1, 10], {}),
    _train("minimize"): (["loss"], {}), _train("apply_gradients"): (["grads"], {}),
    _train("set_weights"): (["weights"], {}),
}
for _opt in ("sgd", "momentum", "adagrad", "adadelta", "adam", "adamw", "adamax", "rmsprop"):
    _make = getattr(tf.train, _opt)
    EXTRA[_optimizer_call(_make)] = ([0.1, 0.9] if _opt == "momentum" else [0.1], {})


# ---------------------------------------------------------------- the bad values
def _disposed():
    t = tf.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    t.dispose()
    return t


NAN, INF = float("nan"), float("inf")
# name -> value (a callable with no arguments is called for a fresh value)
BAD = {
    "None": None, "str": "abc", "float 1.7": 1.7, "nan": NAN, "inf": INF, "-inf": -INF,
    "-1": -1, "0": 0, "2**40": 2 ** 40, "-2**40": -2 ** 40, "1e12": 1e12, "True": True,
    "ndarray[1,0]": np.array([1, 0]), "np.float64(1.5)": np.float64(1.5),
    "np.int64(2**40)": np.int64(2 ** 40), "np.bool_": np.bool_(True),
    "scalar 1.7": tf.keep(tf.scalar(1.7)), "scalar nan": tf.keep(tf.scalar(NAN)),
    "scalar int 1": tf.keep(tf.scalar(1, "int32")), "bool tensor": BOOL,
    "empty tensor": tf.keep(tf.tensor([])), "empty 0x3": tf.keep(tf.zeros([0, 3])),
    "rank 3": tf.keep(tf.zeros([2, 2, 2])), "inf tensor": tf.keep(tf.tensor([INF, NAN])),
    "disposed": _disposed, "[]": [], "[1.5, 'a']": [1.5, "a"], "ragged": [[1], [2, 3]],
    "[nan]": [NAN], "[2**40, 2**40]": [2 ** 40, 2 ** 40], "{}": {}, "object": object(),
    "lambda a, b, c": lambda a, b, c: a, "1j": 1j, "ndarray str": np.array(["a"]),
    "ndarray 0-d": np.array(2.5), "ndarray empty": np.array([]),
}
# arguments that must be whole numbers: a non-integral value may not pass silently
INT_ARGS = {"axis", "perm", "dim", "size", "shape", "k", "depth", "num", "num_rows",
            "num_columns", "block_size", "block_shape", "num_segments", "reps", "begin",
            "strides", "filter_size", "dilations", "dilation", "stride", "num_lower",
            "num_upper", "batch_dims", "output_shape", "window_shape", "num_or_size_splits",
            "argnums"}
NON_INTEGRAL = {"float 1.7", "nan", "inf", "-inf", "np.float64(1.5)", "scalar 1.7",
                "scalar nan", "[nan]", "[1.5, 'a']"}


def targets():
    """(name, function, args, kwargs) of every fuzzed function, in a fixed order."""
    out, seen = [], set()
    fns = sorted(OPS.items()) + [(n, f) for ns in sorted(NAMESPACES)
                                 for n, f in sorted(NAMESPACES[ns].items())]
    for name, fn in fns:
        if name in SKIP or id(fn) in seen:
            continue
        seen.add(id(fn))
        if name in BASE:
            args, kw = BASE[name]
        else:
            params = [p for p in inspect.signature(fn).parameters.values()
                      if p.default is p.empty and p.kind is p.POSITIONAL_OR_KEYWORD]
            args, kw = [X] * len(params), {}
        out.append((name, fn, args, kw))
    for fn, (args, kw) in EXTRA.items():
        out.append((fn.__name__, fn, args, kw))
    return out


def params(fn, args, kw):
    """The argument slots of a call: positions given, then every keyword parameter."""
    try:
        sig = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        sig = {}
    names = [p.name for p in sig.values() if p.kind in (p.POSITIONAL_ONLY,
                                                        p.POSITIONAL_OR_KEYWORD)]
    slots = [(i, names[i] if i < len(names) else f"arg{i}") for i in range(len(args))]
    slots += [(p.name, p.name) for p in sig.values() if p.default is not p.empty
              and p.name not in names[:len(args)] and p.kind is not p.VAR_POSITIONAL]
    return slots


def _camel(name):
    head, *rest = name.split("_")
    return head + "".join(w.title() for w in rest)


def _useful(msg, name, arg):
    """The message names the op (snake_case, camelCase or a TF.js spelling), the argument,
    or says what was expected."""
    low = msg.lower()
    words = (name, _camel(name), name.replace("_", ""), arg, "argument '", "must ",
             "tensor is disposed", "expected", "()")
    parts = all(p in low for p in name.split("_"))       # "Gram-Schmidt" for gram_schmidt
    return len(msg) > 15 and (parts or any(w.lower() in low for w in words if w))


def call_one(name, fn, args, kw, subs):
    """One call with the bad values ``subs`` [(slot, arg, bad name, value)] in place of the
    base arguments: None when the outcome is acceptable, else why not."""
    a, k, based = list(args), dict(kw), []
    for slot, arg, bad, value in subs:
        if isinstance(slot, int):
            based.append(a[slot])
            a[slot] = value
        else:
            based.append(k.get(slot))
            k[slot] = value
    try:
        tf.tidy(lambda: (fn(*a, **k), None)[1])
    except FlowgradError as e:
        if not any(_useful(str(e), name, arg) for _, arg, _, _ in subs):
            return f"{type(e).__name__} without the op or argument: {e}"
        return None
    except Exception as e:          # noqa: BLE001 - any other exception is the finding
        return f"bare {type(e).__name__}: {str(e)[:160]}"
    for (_, arg, bad, _), base in zip(subs, based):
        if bad == "disposed" and isinstance(base, tf.Tensor) and name not in _NO_READ:
            return "a disposed tensor passed silently"
        if bad in NON_INTEGRAL and arg in INT_ARGS:
            return "a non-integral value was accepted (silently truncated?)"
    return None


# functions that never read the values of their tensor arguments
_NO_READ = {"zeros_like", "ones_like", "tidy", "variable_grads"}
def _value(bad):
    v = BAD[bad]
    return v() if bad == "disposed" else v


def fuzz(pairs=0, seed=14, only=None):
    """Every bad value in every argument slot of every target (one at a time), then
    ``pairs`` seeded calls with bad values in two slots at once. ``only``: a set of
    (function, argument) to restrict to. Returns (number of calls, {key: reason})."""
    rng = random.Random(seed)
    names = sorted(BAD)
    failures, calls, multi = {}, 0, []
    for name, fn, args, kw in targets():
        slots = params(fn, args, kw)
        if only is not None:
            slots = [s for s in slots if (name, s[1]) in only]
        for slot, arg in slots:
            for bad in names:
                calls += 1
                why = call_one(name, fn, args, kw, [(slot, arg, bad, _value(bad))])
                if why:
                    failures[(name, arg, bad)] = why
        if len(slots) > 1:
            multi.append((name, fn, args, kw, slots))
    for _ in range(pairs if multi else 0):
        name, fn, args, kw, slots = rng.choice(multi)
        (s1, a1), (s2, a2) = rng.sample(slots, 2)
        b1, b2 = rng.choice(names), rng.choice(names)
        calls += 1
        why = call_one(name, fn, args, kw, [(s1, a1, b1, _value(b1)), (s2, a2, b2, _value(b2))])
        if why:
            failures[(name, f"{a1}+{a2}", f"{b1}+{b2}")] = why
    return calls, failures


def _report(failures):
    return "\n".join(f"{n}({a}={b}): {why}" for (n, a, b), why in sorted(failures.items()))


def test_base_calls_succeed():
    """Every base call is valid, so each fuzzed call differs from a good one in one place."""
    bad = {}
    for name, fn, args, kw in targets():
        try:
            tf.tidy(lambda: (fn(*args, **kw), None)[1])
        except Exception as e:      # noqa: BLE001
            bad[name] = f"{type(e).__name__}: {e}"
    assert not bad, bad


def test_fuzz_public_api():
    """Every bad value in every argument of the whole API (about 21,000 calls, a second or
    two): a result or a FlowgradError that names the op or the argument."""
    before = tf.memory()["num_tensors"]
    calls, failures = fuzz()
    assert calls > 15000
    assert not failures, f"{len(failures)} of {calls} calls:\n" + _report(failures)
    assert tf.memory()["num_tensors"] - before <= 2      # nothing leaks, errors included


@pytest.mark.slow
def test_fuzz_public_api_pairs():
    """Bad values in two arguments at once, 100,000 seeded calls."""
    calls, failures = fuzz(pairs=100_000, seed=2024)
    assert not failures, f"{len(failures)} of {calls} calls:\n" + _report(failures)


if __name__ == "__main__":       # python tests/test_fuzz.py [PAIRS]: the full report
    import sys
    t = time.perf_counter()
    calls, failures = fuzz(pairs=int(sys.argv[1]) if len(sys.argv) > 1 else 0)
    print(_report(failures))
    print(f"{calls} calls, {len(failures)} failures, {time.perf_counter() - t:.1f} s")
