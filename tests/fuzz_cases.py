"""What tests/test_fuzz.py fuzzes: every public callable of flowgrad, found by walking the
public namespaces (``tf.*``, the op table, ``tf.losses`` / ``image`` / ``linalg``,
``tf.train``, ``tf.debug``) and the public methods of their classes (``Tensor``,
``Variable``, the optimizers, schedules, ``GradientTape``, ``GradientMonitor``...), each with
one valid call. The fuzzer takes its argument slots from the callable's own signature, so a
new parameter is fuzzed the day it lands; a new public callable with parameters needs a
valid call here (``CASES``, or ``BASE`` for an op) or a line in ``NO_CASE`` saying why it
is not fuzzed — ``test_every_public_callable_has_a_valid_call`` fails otherwise."""
import atexit
import inspect
import io
import os
import shutil
import tempfile
import types

import numpy as np

import flowgrad as tf
from flowgrad.camel_case import Namespace
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
SPD = tf.keep(tf.tensor([[2.0, 0.5], [0.5, 1.0]]))      # symmetric positive definite
BOOL = tf.keep(tf.tensor([[True, False, True], [False, True, True]]))
IMG = _t((1, 4, 4, 2))
VOL = _t((1, 4, 4, 4, 2))
LSTM_K, LSTM_B = _t((5, 12)), _t((12,))
D1, C1 = _t((1, 2)), _t((1, 3))


def _cell(data, c, h):
    return tf.basic_lstm_cell(1.0, LSTM_K, LSTM_B, data, c, h)


# ---------------------------------------------------------------- the op table
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
    "pool": ([IMG, [2, 2], "avg", "same"], {}),
    "dilation2d": ([IMG, _t((2, 2, 2)), 1, "same"], {}),
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
    "eigh": ([SPD], {}), "eigvalsh": ([SPD], {}), "cholesky": ([SPD], {}),
    "det": ([SPD], {}), "inv": ([SPD], {}), "slogdet": ([SPD], {}),
    "solve": ([SPD, V[:2]], {}), "triangular_solve": ([SPD, V[:2]], {}),
    "matrix_power": ([SPD, 2], {}),
    "sparse_softmax_cross_entropy": ([_i([0, 2]), X], {}),
    "logical_and": ([BOOL, BOOL], {}), "logical_or": ([BOOL, BOOL], {}),
    "logical_xor": ([BOOL, BOOL], {}), "logical_not": ([BOOL], {}),
}
SKIP = {"Reduction"}    # an enum, not a function


# ---------------------------------------------------------------- valid calls of the rest
class Fresh:
    """An argument made anew for every call (a variable, an optimizer, a tensor the call
    disposes) and disposed after it."""

    def __init__(self, make):
        self.make = make


class Case:
    """A valid call: ``args`` and ``kw`` (Fresh values made for each call), or ``make(own)``
    returning them (``own(obj)`` registers what to dispose after the call; for arguments
    that share one fresh variable). Options, chained: ``then(*a, **k)`` calls the function
    the call returns (``tf.grad(f)(x)``), and fuzzes that function's own parameters too
    (``pick`` finds it in the result: ``tf.vjp``'s is ``[1]``); ``after(fn)`` restores the
    global state a call may change (``keeps(get, put)``: put back what get() gave before
    the call); ``slow()`` fuzzes it only under ``-m slow`` (files, matplotlib)."""

    def __init__(self, args=(), kw=None, make=None):
        self.args, self.kw, self.make = list(args), dict(kw or {}), make
        self.level2 = self.undo = None
        self.pick = self.saved = self.get = None
        self.is_slow = False

    def then(self, *args, pick=None, **kw):
        self.level2, self.pick = Case(args, kw), pick
        return self

    def after(self, fn):
        self.undo = fn
        return self

    def keeps(self, get, put):
        self.get, self.undo = get, lambda: put(self.saved)
        return self

    def slow(self):
        self.is_slow = True
        return self

    def build(self):
        """(args, kwargs, owned): fresh arguments and what to dispose after the call."""
        owned = []
        if self.get is not None:
            self.saved = self.get()

        def own(obj):
            owned.append(obj)
            return obj
        if self.make is not None:
            args, kw = self.make(own)
        else:
            args, kw = self.args, self.kw
        args = [own(a.make()) if isinstance(a, Fresh) else a for a in args]
        kw = {k: own(v.make()) if isinstance(v, Fresh) else v for k, v in kw.items()}
        return list(args), dict(kw), owned


def call(*args, **kw):
    return Case(args, kw)


def made(make):
    return Case(make=make)


def release(objs, tensors=False):
    """Dispose what a call owned (``tensors``: its fresh tensors too, kept or not) or
    returned: variables, optimizers, hook handles, monitors; other tensors go with the
    call's tidy."""
    for o in objs:
        if isinstance(o, (tf.Variable, tf.train.Optimizer)) or (
                tensors and isinstance(o, tf.Tensor)):
            o.dispose()
        elif isinstance(o, tf.debug.HookHandle):
            o.remove()
        elif isinstance(o, tf.debug.GradientMonitor):
            o.detach()
            o.close()
        elif isinstance(o, (list, tuple)):
            release(o, tensors)


def _sq(v):
    return (v * v).sum()


def _custom(x, save):
    return {"value": x * 2, "grad_func": lambda dy, saved: [dy * 2]}


def _var():
    return tf.variable(V)


def _opt():
    return tf.train.adam(0.1)


def _with_var(fn):
    """make(own) for a call on a fresh variable w: fn(w, own) -> (args, kw)."""
    return made(lambda own: fn(own(_var()), own))


def _cockpit(own):
    """A monitor with the economy instruments over two steps of a fresh variable."""
    w = own(tf.variable(V, name=None))
    opt = own(_opt())

    def loss(x):
        return (x * w).sum().square()
    m = own(tf.debug.monitor(opt, instruments="economy", loss_fn=loss, inputs=(X,), every=1))
    for _ in range(2):
        opt.minimize(lambda: tf.vmap(loss)(X).mean())
    return m


def _monitor(own, steps=2):
    """A GradientMonitor with ``steps`` recorded steps of a fresh variable."""
    w = own(tf.variable(V, name=None))
    m = own(tf.debug.GradientMonitor())
    for _ in range(steps):
        m.record({w: V * 2}, loss=1.0)
    return m


# the fuzz runs in this folder: a path argument ("abc") may be written
FUZZ_DIR = tempfile.mkdtemp(prefix="flowgrad-fuzz-")
atexit.register(shutil.rmtree, FUZZ_DIR, ignore_errors=True)


def _in_dir(name):
    return os.path.join(FUZZ_DIR, name)


def _checkpoint(own):
    return tf.train.Checkpoint(w=own(_var()))


def _saved(own):
    ck = _checkpoint(own)
    return ck, ck.write(_in_dir("base.safetensors"))


CASES = {
    # ------------------------------------------------ tf.*
    "tf.grad": call(_sq).then(X), "tf.grads": call(lambda a, b: (a * b).sum()).then([X, X]),
    "tf.value_and_grad": call(_sq).then(X),
    "tf.value_and_grads": call(lambda a: _sq(a)).then([X]),
    "tf.jacobian": call(lambda v: v * v).then(V), "tf.hessian": call(_sq).then(V),
    "tf.hvp": call(_sq).then(V, V), "tf.jvp": call(lambda v: v * v, [V], [V]),
    "tf.vjp": call(lambda v: v * v, V).then(V, pick=lambda r: r[1]),
    "tf.custom_grad": call(_custom).then(V),
    "tf.vmap": call(lambda r: r * 2).then(X), "tf.jit": call(lambda a: a * 2).then(X),
    "tf.variable_grads": _with_var(lambda w, own: ([lambda: _sq(w)], {"var_list": [w]})),
    "tf.variable": call(V), "tf.tidy": call(lambda: X * 2),
    "tf.keep": call(Fresh(lambda: tf.tensor([1.0]))),
    "tf.dispose": call(Fresh(lambda: tf.tensor([1.0]))),
    "tf.print": call(X),
    "tf.profile": call(lambda: X * 2), "tf.time": call(lambda: X * 2),
    "tf.get_gradient": call("Square"), "tf.KernelBackend": call("numpy"),
    "tf.enable_debug_mode": call("raise").after(tf.disable_debug_mode),
    "tf.set_backend": call("numpy").keeps(tf.get_backend, tf.set_backend),
    "tf.set_jit_threads": call(2).keeps(tf.get_jit_threads, tf.set_jit_threads),
    "tf.set_memory_policy": call("pool").keeps(tf.get_memory_policy, tf.set_memory_policy),
    "tf.GradientTape": call(),
    "GradientTape.gradient": made(lambda own: _taped()),
    "GradientTape.watch": made(lambda own: ([_tape(), X], {})),
    "tf.clip_by_norm": call(X, 1.0), "tf.clip_by_global_norm": call([X, V], 1.0),
    "tf.global_norm": call([X, V]),
    # ------------------------------------------------ Tensor and Variable methods
    "Tensor.__getitem__": call(X, 0), "Tensor.__format__": call(V, ".2f"),
    "Tensor.__matmul__": call(M, M), "Tensor.__rmatmul__": call(M, M),
    "Tensor.as1d": call(X), "Tensor.as2d": call(X, 3, 2), "Tensor.as3d": call(X, 1, 3, 2),
    "Tensor.as4d": call(X, 1, 1, 3, 2), "Tensor.as5d": call(X, 1, 1, 1, 3, 2),
    "Tensor.as_type": call(X, "int32"), "Tensor.print": call(X),
    "linalg.norm": call(X, "fro"),
    "Tensor.astype": call(X, "int32"), "Tensor.swapaxes": call(X, 0, 1),
    "Tensor.reshape": call(X, 3, 2), "Tensor.transpose": call(X, 1, 0),
    "Tensor.to_string": call(X), "Tensor.variable": call(V),
    "Tensor.where": call(X, BOOL, X), "Variable.assign": call(Fresh(_var), V),
    # ------------------------------------------------ tf.train: optimizers and their methods
    "tf.train.sgd": call(0.1), "tf.train.momentum": call(0.1, 0.9),
    "tf.train.adagrad": call(0.1), "tf.train.adadelta": call(0.1), "tf.train.adam": call(0.1),
    "tf.train.adamw": call(0.1), "tf.train.adamax": call(0.1), "tf.train.rmsprop": call(0.1),
    "tf.SGDOptimizer": call(0.1), "tf.MomentumOptimizer": call(0.1, 0.9),
    "tf.AdagradOptimizer": call(0.1), "tf.AdadeltaOptimizer": call(0.1),
    "tf.AdamOptimizer": call(0.1), "tf.AdamWOptimizer": call(0.1),
    "tf.AdamaxOptimizer": call(0.1), "tf.RMSPropOptimizer": call(0.1),
    "tf.Optimizer": call(0.1),
    "Optimizer.minimize": _with_var(lambda w, own: ([own(_opt()), lambda: _sq(w)],
                                                    {"var_list": [w]})),
    "Optimizer.compute_gradients": _with_var(lambda w, own: ([own(_opt()), lambda: _sq(w)],
                                                             {"var_list": [w]})),
    "Optimizer.apply_gradients": _with_var(lambda w, own: ([own(_opt()), {w: V}], {})),
    "Optimizer.set_weights": made(lambda own: ([o := own(_opt()), o.get_weights()], {})),
    "Optimizer.set_learning_rate": call(Fresh(_opt), 0.1),
    "Optimizer.from_config": call(tf.train.AdamOptimizer, {"learning_rate": 0.1}),
    "MomentumOptimizer.set_momentum": call(Fresh(lambda: tf.train.momentum(0.1, 0.9)), 0.5),
    # ------------------------------------------------ tf.train: schedules, progress, files
    "tf.train.exponential_decay": call(0.1, 10, 0.5), "tf.train.cosine_decay": call(0.1, 10),
    "tf.train.piecewise_constant": call([10], [0.1, 0.01]), "tf.train.warmup": call(0.1, 10),
    "tf.train.ExponentialDecay": call(0.1, 10, 0.5), "tf.train.CosineDecay": call(0.1, 10),
    "tf.train.PiecewiseConstant": call([10], [0.1, 0.01]), "tf.train.Warmup": call(0.1, 10),
    "ExponentialDecay.__call__": call(tf.train.exponential_decay(0.1, 10, 0.5), 3),
    "CosineDecay.__call__": call(tf.train.cosine_decay(0.1, 10), 3),
    "PiecewiseConstant.__call__": call(tf.train.piecewise_constant([10], [0.1, 0.01]), 3),
    "Warmup.__call__": call(tf.train.warmup(0.1, 10), 3),
    "tf.train.progress": call([1, 2], file=io.StringIO(), enable=False),
    "tf.train.Progress": call([1, 2], None, None, False, io.StringIO(), None, None, {}),
    "tf.train.latest_checkpoint": call(FUZZ_DIR),
    "tf.train.Checkpoint": call(w=Fresh(_var)).slow(),
    "Checkpoint.save": made(lambda own: ([_checkpoint(own), _in_dir("c")], {})).slow(),
    "Checkpoint.write": made(lambda own: ([_checkpoint(own), _in_dir("w.st")], {})).slow(),
    "Checkpoint.restore": made(lambda own: (list(_saved(own)), {})).slow(),
    "tf.train.CheckpointManager": made(lambda own: ([_checkpoint(own), FUZZ_DIR], {})).slow(),
    "CheckpointManager.save": made(lambda own: ([tf.train.CheckpointManager(
        _checkpoint(own), _in_dir("m"))], {})).slow(),
    "CheckpointManager.save_every_n_steps": made(lambda own: ([tf.train.CheckpointManager(
        _checkpoint(own), _in_dir("n")), 2], {"optimizer": own(_opt())})).slow(),
    # ------------------------------------------------ tf.debug
    "tf.debug.check_grads": call(_sq, V), "tf.debug.check_custom_grad":
        call(tf.custom_grad(lambda x, save: (x * 2, lambda dy, s: dy * 2)), V),
    "tf.debug.check_numerics": call(),
    "tf.debug.explain_gradient": call(_sq, V), "tf.debug.graph": call(_sq, V),
    "tf.debug.on_gradient": call(Fresh(_var), lambda g: g),
    "tf.debug.register_hook": call(X, lambda g: g),
    "tf.debug.callback": call(lambda *a: None, X),
    "tf.debug.per_example_grad_norms": _with_var(
        lambda w, own: ([lambda x: (x * w).sum(), (X,)], {"var_list": [w]})),
    "tf.debug.worst_examples": call(np.array([1.0, 3.0, 2.0]), 2),
    "tf.debug.hessian_eigenvalues": _with_var(
        lambda w, own: ([lambda: (w * w * w).sum()], {"k": 1, "seed": 0})),
    "tf.debug.hessian_trace": _with_var(
        lambda w, own: ([lambda: (w * w * w).sum()], {"max_iter": 3, "seed": 0})),
    "tf.debug.hessian_spectrum": _with_var(
        lambda w, own: ([lambda: (w * w * w).sum()], {"iters": 3, "seed": 0})),
    "tf.debug.gradient_noise": _with_var(
        lambda w, own: ([lambda x: (x * w * w).sum(), (X,)], {"var_list": [w]})),
    "tf.debug.loss_landscape": _with_var(
        lambda w, own: ([lambda: (w * w).sum()], {"steps": 3, "seed": 0})),
    "HessianSpectrum.density": call(tf.debug.HessianSpectrum(
        np.array([[1.0, 2.0]]), np.array([[0.5, 0.5]]), 2)),
    "HessianSpectrum.moment": call(tf.debug.HessianSpectrum(
        np.array([[1.0, 2.0]]), np.array([[0.5, 0.5]]), 2), 2),
    "HessianSpectrum.plot": call(tf.debug.HessianSpectrum(
        np.array([[1.0, 2.0]]), np.array([[0.5, 0.5]]), 2)).slow(),
    "LossLandscape.plot": _with_var(lambda w, own: (
        [tf.debug.loss_landscape(lambda: (w * w).sum(), steps=3, seed=0)], {})).slow(),
    "tf.debug.diagnose": _with_var(lambda w, own: (
        [lambda x: (x * w).sum().square(), (X,), own(_opt())], {"steps": 2})),
    "tf.debug.GradientMonitor": call(),
    "tf.debug.monitor": call(Fresh(_opt)),
    "GradientMonitor.attach": call(Fresh(tf.debug.GradientMonitor), Fresh(_opt)),
    "GradientMonitor.record": _with_var(
        lambda w, own: ([own(tf.debug.GradientMonitor()), {w: V}], {})),
    "GradientMonitor.record_examples": _with_var(lambda w, own: (
        [own(tf.debug.GradientMonitor()), lambda x: (x * w).sum(), (X,)], {"step": 0})),
    "GradientMonitor.watch_examples": _with_var(lambda w, own: (
        [own(tf.debug.GradientMonitor()), lambda x: (x * w).sum(), lambda: (X,)], {})),
    "GradientMonitor.on_apply": _with_var(lambda w, own: (
        [own(tf.debug.GradientMonitor()), own(_opt()), [(w, V)], tf.scalar(1.0)], {})),
    "GradientMonitor.on_applied": _with_var(lambda w, own: (
        [own(tf.debug.GradientMonitor()), own(_opt()), [(w, V)]], {})),
    "GradientMonitor.histogram": made(lambda own: ([_monitor(own)], {})),
    "History.matrix": made(lambda own: ([_monitor(own).history], {})),
    "Explanation.__getitem__": made(lambda own: ([tf.debug.explain_gradient(_sq, V), 0], {})),
    "Graph.node": made(lambda own: ([tf.debug.graph(_sq, V), "v"], {})),
    "Graph.to_dot": made(lambda own: ([tf.debug.graph(_sq, V)], {})),
    # matplotlib, files: slow
    "tf.debug.plot_loss": made(lambda own: ([_monitor(own)], {})).slow(),
    "tf.debug.plot_cockpit": made(lambda own: ([_cockpit(own)], {})).slow(),
    "GradientMonitor.plot_cockpit": made(lambda own: ([_cockpit(own)], {})).slow(),
    "tf.debug.plot_grad_norms": made(lambda own: ([_monitor(own)], {})).slow(),
    "tf.debug.plot_grad_flow": made(lambda own: ([_monitor(own)], {})).slow(),
    "tf.debug.plot_histograms": made(lambda own: ([_monitor(own)], {})).slow(),
    "tf.debug.plot_example_norms": _with_var(lambda w, own: ([_examples(own, w)], {})).slow(),
    "GradientMonitor.to_tensorboard": made(lambda own: ([_monitor(own), FUZZ_DIR], {})).slow(),
    "tf.debug.report": made(lambda own: ([_monitor(own), _in_dir("r.html")], {})).slow(),
}

# the operators that are not the op table's own functions (x + y is tf.add: fuzzed there)
for _op in ("radd", "rsub", "rmul", "rtruediv", "rfloordiv", "rmod", "rpow", "lt", "le", "gt",
            "ge"):
    CASES[f"Tensor.__{_op}__"] = call(X, X)
for _op in ("and", "rand", "or", "ror", "xor", "rxor"):
    CASES[f"Tensor.__{_op}__"] = call(BOOL, BOOL)


def _tape():
    t = tf.GradientTape(persistent=True)
    t.__enter__()
    t.__exit__(None, None, None)
    return t


def _taped():
    with tf.GradientTape() as t:
        t.watch(V)
        y = _sq(V)
    return [t, y, V], {}


def _examples(own, w):
    m = own(tf.debug.GradientMonitor())
    m.record({w: V}, loss=1.0)
    m.record_examples(lambda x: (x * w).sum(), (X,))
    return m


_RECORD = "a result record flowgrad builds and users read; never constructed by users"
# the optimizers' update protocol: minimize and apply_gradients (fuzzed) call these with the
# pairs and slots they made and checked; a new optimizer implements the two hooks
_PROTOCOL = ("the optimizer's update protocol, called by minimize / apply_gradients (fuzzed) "
             "with what they made and checked")
# public callables with parameters that are not fuzzed, and why
NO_CASE = {
    "Tensor.__setitem__": "always an ArgumentError (tensors are immutable; tested in "
                          "test_memory.py)",
    "tf.Tensor": "made by tf.tensor & co (fuzzed there), never constructed directly",
    "tf.Variable": "made by tf.variable (fuzzed there), never constructed directly",
    "tf.GradMap": "variable_grads' result dict; its methods are dict's",
    "GradMap.get": "dict.get keyed by a Variable too: any key is a valid key",
    "GradMap.__getitem__": "dict lookup: any missing key is a KeyError, as a dict's",
    "tf.train.ConfigDict": "get_config's result dict",
    "tf.train.Schedule": "the base class of the schedules (fuzzed through them)",
    "Schedule.__call__": "abstract: each schedule's __call__ is fuzzed",
    "Engine.start_scope": "TF.js's internal engine object (tf.engine()); tidy is fuzzed",
    "Engine.end_scope": "TF.js's internal engine object (tf.engine()); tidy is fuzzed",
    "tf.next_frame": "a coroutine function; nothing to check but its await",
    "AdadeltaOptimizer.slot_init": _PROTOCOL,
    "AdadeltaOptimizer.update_rule": _PROTOCOL,
    "AdagradOptimizer.slot_init": _PROTOCOL,
    "AdagradOptimizer.update_rule": _PROTOCOL,
    "AdamOptimizer.slot_init": _PROTOCOL,
    "AdamOptimizer.update_rule": _PROTOCOL,
    "AdamWOptimizer.update_rule": _PROTOCOL,
    "AdamaxOptimizer.slot_init": _PROTOCOL,
    "AdamaxOptimizer.update_rule": _PROTOCOL,
    "MomentumOptimizer.slot_init": _PROTOCOL,
    "MomentumOptimizer.update_rule": _PROTOCOL,
    "Optimizer.apply_pairs": _PROTOCOL,
    "Optimizer.apply_here": _PROTOCOL,
    "Optimizer.clip_pairs": _PROTOCOL,
    "Optimizer.slot_init": _PROTOCOL,
    "Optimizer.update_rule": _PROTOCOL,
    "RMSPropOptimizer.slot_init": _PROTOCOL,
    "RMSPropOptimizer.update_rule": _PROTOCOL,
    "SGDOptimizer.update_rule": _PROTOCOL,
    "tf.debug.Culprit": _RECORD, "tf.debug.Explanation": _RECORD, "tf.debug.Finding": _RECORD,
    "tf.debug.HookHandle": _RECORD, "tf.debug.InputCheck": _RECORD,
    "tf.debug.InputExplanation": _RECORD, "tf.debug.Graph": _RECORD,
    "tf.debug.GraphNode": _RECORD, "tf.debug.KernelInfo": _RECORD,
    "tf.debug.LeakReport": _RECORD, "tf.debug.LeakSite": _RECORD,
    "tf.debug.ProfileInfo": _RECORD, "tf.debug.Flag": _RECORD, "tf.debug.History": _RECORD,
    "tf.debug.GradientNoise": _RECORD, "tf.debug.HessianEigen": _RECORD,
    "tf.debug.HessianSpectrum": _RECORD, "tf.debug.HessianTrace": _RECORD,
    "tf.debug.LossLandscape": _RECORD, "tf.debug.Diagnosis": _RECORD,
    "tf.debug.TrainingFinding": _RECORD,
    "History.__getitem__": "a mapping's lookup (variable name -> its history), as a dict's",
    "Result.__getitem__": "a result record's fields by name or position, as a tuple's",
    "check_numerics.report": "called by the engine with a Finding it made (internal hook)",
    "Graph.render": "needs Graphviz's dot program (tests/test_graph.py checks its arguments)",
    "Graph.to_svg": "needs Graphviz's dot program (tests/test_graph.py checks its arguments)",
    "GradientMonitor.plot_loss": "the same as tf.debug.plot_loss (fuzzed)",
    "GradientMonitor.plot_grad_norms": "the same as tf.debug.plot_grad_norms (fuzzed)",
    "GradientMonitor.plot_grad_flow": "the same as tf.debug.plot_grad_flow (fuzzed)",
    "GradientMonitor.plot_histograms": "the same as tf.debug.plot_histograms (fuzzed)",
    "GradientMonitor.plot_example_norms": "the same as tf.debug.plot_example_norms (fuzzed)",
}

# the dunder methods that take arguments a user passes (operators, indexing, calls)
OPERATORS = {"__getitem__", "__setitem__", "__call__", "__format__", "__matmul__",
             "__rmatmul__"} | {f"__{r}{op}__" for r in ("", "r") for op in (
                 "add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "and", "or",
                 "xor")} | {"__lt__", "__le__", "__gt__", "__ge__"}


def public_api():
    """{name: callable} of every public callable, each once (the first name it is found
    under): the op table by op name, the namespaces' functions by theirs, ``tf.*``,
    ``tf.train.*`` and ``tf.debug.*`` by ``tf.<path>``, and the public methods (and
    operators) their classes define by ``Class.method``."""
    out, seen, classes = {}, set(), []

    def add(name, obj):
        if id(obj) not in seen:
            seen.add(id(obj))
            out[name] = obj
    for n in sorted(OPS):
        if n not in SKIP:
            add(n, OPS[n])
    for ns in sorted(NAMESPACES):
        for n, f in sorted(NAMESPACES[ns].items()):
            if n not in SKIP:       # (tf.linalg.norm beside tf.norm: both, by their paths)
                add(n if n not in out else f"{ns}.{n}", f)
    for prefix, mod in (("tf", tf), ("tf.train", tf.train), ("tf.debug", tf.debug)):
        for n in sorted(mod.__all__):
            o = getattr(mod, n)
            if (n in SKIP or isinstance(o, (types.ModuleType, Namespace)) or not callable(o)
                    or isinstance(o, type) and issubclass(o, (BaseException, Warning))):
                continue
            add(f"{prefix}.{n}", o)
            if isinstance(o, type):
                classes.append(o)
    for cls in classes:
        for m in sorted(dir(cls)):
            if m.startswith("_") and m not in OPERATORS:
                continue
            st = inspect.getattr_static(cls, m)
            fn = st.__func__ if isinstance(st, (staticmethod, classmethod)) else st
            if inspect.isfunction(fn) and fn.__module__.startswith("flowgrad"):
                owner = next(c for c in cls.__mro__ if m in vars(c))
                add(f"{owner.__name__}.{m}", fn)
    return out


def has_parameters(fn):
    """Whether fn takes an argument (other than self/cls) a user could get wrong."""
    try:
        ps = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return True
    return any(p.name not in ("self", "cls") for p in ps.values())


def op_case(name, fn):
    """The op table's valid call: BASE, else plain tensors in its required parameters."""
    if name in BASE:
        args, kw = BASE[name]
        return Case(args, kw)
    params = [p for p in inspect.signature(fn).parameters.values()
              if p.default is p.empty and p.kind is p.POSITIONAL_OR_KEYWORD]
    return Case([X] * len(params))
