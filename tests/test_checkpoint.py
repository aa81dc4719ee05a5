"""tf.train.Checkpoint and CheckpointManager: exact resumes, atomic and verified files,
errors that name the file and the object, all-or-nothing restores (issue 16)."""
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import flowgrad as tf

from test_atomic_updates import MAKERS       # (every optimizer configuration)

OPTIMIZERS = {**MAKERS,
              "adam_schedule": lambda: tf.train.adam(tf.train.exponential_decay(0.05, 5, 0.5))}

rng0 = np.random.default_rng(16)
X = rng0.normal(size=(16, 3)).astype(np.float32)
Y = rng0.normal(size=(16, 1)).astype(np.float32)


class Model:
    """A small MLP with dropout (so the random state matters too)."""

    def __init__(self, seed=0):
        r = np.random.default_rng(seed)
        self.w1 = tf.variable(tf.tensor(r.normal(size=(3, 8)).astype(np.float32)))
        self.b1 = tf.variable(tf.zeros([8]))
        self.w2 = tf.variable(tf.tensor(r.normal(size=(8, 1)).astype(np.float32)))
        self.x, self.y = tf.tensor(X), tf.tensor(Y)

    def loss(self):
        h = tf.dropout(self.x.mat_mul(self.w1).add(self.b1).tanh(), 0.25)
        return h.mat_mul(self.w2).sub(self.y).square().mean()

    def variables(self):
        return {"w1": self.w1, "b1": self.b1, "w2": self.w2}

    def dispose(self):
        tf.dispose([self.w1, self.b1, self.w2, self.x, self.y])


def _train(opt, model, steps):
    """The losses of ``steps`` steps, as bytes (bitwise, NaN included)."""
    return [np.float32(opt.minimize(model.loss, return_cost=True).item()).tobytes()
            for _ in range(steps)]


def _state(opt, model):
    """Everything a resume must reproduce, as bytes."""
    out = {k: v.numpy().tobytes() for k, v in model.variables().items()}
    for w in opt.get_weights():
        out["opt:" + w.name] = w.tensor.numpy().tobytes()
    out["iterations"] = opt.iterations
    return out


@pytest.mark.parametrize("kind", list(OPTIMIZERS))
def test_a_restored_run_continues_bit_for_bit(kind, tmp_path):
    model, opt = Model(), OPTIMIZERS[kind]()
    try:
        _train(opt, model, 3)
        ckpt = tf.train.Checkpoint(optimizer=opt, model=model.variables())
        path = ckpt.save(tmp_path / "ckpt")
        want = _train(opt, model, 20)
        after = _state(opt, model)
        ckpt.restore(path)
        assert opt.iterations == 3
        assert _train(opt, model, 20) == want            # bitwise: == on Python floats
        assert _state(opt, model) == after
    finally:
        model.dispose()
        opt.dispose()


@pytest.mark.parametrize("kind", [k for k in OPTIMIZERS if k != "sgd"])
def test_slots_made_after_the_save_are_reset_by_the_restore(kind, tmp_path):
    # the variable b had no step (so no slots) when the file was saved, then got some: a
    # restore into the same optimizer must give b's slots their first values back
    model, opt = Model(), OPTIMIZERS[kind]()
    try:
        for _ in range(2):
            opt.minimize(lambda: model.w1.square().sum())       # b1 and w2: no slots yet
        ckpt = tf.train.Checkpoint(optimizer=opt, model=model.variables())
        path = ckpt.save(tmp_path / "ckpt")
        want = _train(opt, model, 5)
        after = _state(opt, model)
        ckpt.restore(path)
        assert _train(opt, model, 5) == want
        assert _state(opt, model) == after
    finally:
        model.dispose()
        opt.dispose()


@pytest.mark.parametrize("make, live", [
    (lambda: tf.train.momentum(0.1, 0.9), lambda: tf.train.momentum(0.1, 0.9, True)),
    (lambda: tf.train.rmsprop(0.1, centered=True), lambda: tf.train.rmsprop(0.1)),
    (lambda: tf.train.adadelta(0.5), lambda: tf.train.adadelta(0.5, use_updated_accumulator=True)),
])
def test_a_file_saved_with_other_optimizer_switches_is_a_mismatch(make, live, tmp_path):
    w = tf.variable(tf.tensor([1.0, 2.0]))
    saved, other = make(), live()
    try:
        saved.minimize(lambda: w.square().sum())
        path = tf.train.Checkpoint(opt=saved, w=w).save(tmp_path / "c")
        before = w.numpy().copy()
        w.assign(tf.tensor([5.0, 5.0]))
        with pytest.raises(tf.errors.CheckpointError, match="of optimizer 'opt': expected"):
            tf.train.Checkpoint(opt=other, w=w).restore(path)
        np.testing.assert_array_equal(w.numpy(), [5.0, 5.0])    # nothing restored
        tf.train.Checkpoint(opt=make(), w=w).restore(path)
        np.testing.assert_array_equal(w.numpy(), before)
    finally:
        tf.dispose(w)


def test_restore_in_another_process_with_new_variable_names(tmp_path):
    model, opt = Model(), tf.train.adam(0.05)
    try:
        _train(opt, model, 4)
        ckpt = tf.train.Checkpoint(optimizer=opt, model=model.variables())
        path = ckpt.save(tmp_path / "run")
        want = [v.hex() for v in _train(opt, model, 20)]   # (bytes.hex)
    finally:
        model.dispose()
        opt.dispose()
    script = textwrap.dedent(f"""
        import json, sys
        sys.path.insert(0, {os.path.dirname(__file__)!r})
        import flowgrad as tf
        tf.variable(tf.scalar(0.0))                # shifts the automatic variable names
        from test_checkpoint import Model, _train
        model, opt = Model(seed=99), tf.train.adam(0.05)     # other initial values
        tf.train.Checkpoint(optimizer=opt, model=model.variables()).restore({str(path)!r})
        print(json.dumps([v.hex() for v in _train(opt, model, 20)]))
    """)
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout.strip().splitlines()[-1]) == want


def _setup(tmp_path):
    model, opt = Model(), tf.train.adam(0.05)
    _train(opt, model, 2)
    ckpt = tf.train.Checkpoint(optimizer=opt, model=model.variables())
    path = ckpt.save(tmp_path / "ckpt")
    _train(opt, model, 3)                   # the live state now differs from the file
    return model, opt, ckpt, path


def _check_nothing_restored(ckpt_call, model, opt, match):
    before = _state(opt, model)
    with pytest.raises(tf.CheckpointError, match=match):
        ckpt_call()
    assert _state(opt, model) == before


@pytest.mark.parametrize("where", ["data", "header", "end"])
def test_a_flipped_byte_is_detected_and_nothing_is_restored(where, tmp_path):
    model, opt, ckpt, path = _setup(tmp_path)
    try:
        data = bytearray(open(path, "rb").read())
        n = int.from_bytes(data[:8], "little")
        i = {"data": 8 + n + 40, "header": 8 + n // 2, "end": len(data) - 1}[where]
        data[i] ^= 0x10
        open(path, "wb").write(bytes(data))
        _check_nothing_restored(lambda: ckpt.restore(path), model, opt,
                                rf"{path}: (checksum mismatch|not a whole)")
    finally:
        model.dispose()
        opt.dispose()


@pytest.mark.parametrize("keep", [0, 5, 100, -10])
def test_a_truncated_file_is_detected_and_nothing_is_restored(keep, tmp_path):
    model, opt, ckpt, path = _setup(tmp_path)
    try:
        data = open(path, "rb").read()
        open(path, "wb").write(data[:keep])
        _check_nothing_restored(lambda: ckpt.restore(path), model, opt,
                                rf"{path}: not a whole flowgrad checkpoint")
    finally:
        model.dispose()
        opt.dispose()


def test_shape_dtype_missing_and_extra_objects_are_named(tmp_path):
    model, opt, ckpt, path = _setup(tmp_path)
    others = []
    try:
        def live(**objects):
            c = tf.train.Checkpoint(**objects)
            return lambda: c.restore(path)
        wide = tf.variable(tf.zeros([3, 9]))
        ints = tf.variable(tf.zeros([8], dtype="int32"))
        others += [wide, ints]
        vs = model.variables()
        _check_nothing_restored(live(optimizer=opt, model={**vs, "w1": wide}), model, opt,
                                r"variable 'model/w1': expected float32 \[3, 9\] \(the live "
                                r"object\), found float32 \[3, 8\]")
        _check_nothing_restored(live(optimizer=opt, model={**vs, "b1": ints}), model, opt,
                                r"variable 'model/b1': expected int32 \[8\] .* found "
                                r"float32 \[8\]")
        _check_nothing_restored(live(optimizer=opt, model={**vs, "w3": wide}), model, opt,
                                r"no variable 'model/w3' in the file")
        _check_nothing_restored(live(model=vs), model, opt,
                                r"holds 'optimizer', which this Checkpoint does not name")
        sgd = tf.train.sgd(0.1)
        others.append(sgd)
        _check_nothing_restored(live(optimizer=sgd, model=vs), model, opt,
                                r"optimizer 'optimizer': expected SGD .* found Adam")
        # weights only: partial=True leaves the optimizer of the file alone
        it = opt.iterations
        tf.train.Checkpoint(model=vs).restore(path, partial=True)
        assert opt.iterations == it and model.w1.numpy().tobytes() != b""
    finally:
        model.dispose()
        opt.dispose()
        tf.dispose(others)


def test_an_optimizer_with_state_for_an_unnamed_variable_cannot_be_saved(tmp_path):
    model, opt = Model(), tf.train.adam(0.05)
    try:
        _train(opt, model, 1)
        ckpt = tf.train.Checkpoint(optimizer=opt, w1=model.w1, b1=model.b1)
        with pytest.raises(tf.CheckpointError, match=r"optimizer 'optimizer' has state "
                                                     r"\(slots\) for variable '.*'"):
            ckpt.save(tmp_path / "x")
        assert not list(tmp_path.iterdir()) and ckpt.save_counter == 0
    finally:
        model.dispose()
        opt.dispose()


def test_bad_checkpoint_arguments():
    w = tf.variable(tf.scalar(1.0))
    s = tf.variable(tf.tensor(["a"]))
    try:
        with pytest.raises(tf.ArgumentError, match="needs the variables and optimizers"):
            tf.train.Checkpoint()
        with pytest.raises(tf.ArgumentError, match="'x' must be a tf.variable"):
            tf.train.Checkpoint(x=np.zeros(3))
        with pytest.raises(tf.ArgumentError, match="named both 'a' and 'b/0'"):
            tf.train.Checkpoint(a=w, b=[w])
        with pytest.raises(tf.CheckpointError, match="'s' is a string tensor"):
            tf.train.Checkpoint(s=s).write("/nonexistent-dir-flowgrad/x.safetensors")
        with pytest.raises(tf.CheckpointError, match="no such checkpoint file"):
            tf.train.Checkpoint(w=w).restore("/nonexistent-dir-flowgrad/x.safetensors")
        with pytest.raises(tf.ArgumentError, match="checkpoint must be a tf.train.Checkpoint"):
            tf.train.CheckpointManager("ckpt", "/tmp")
        with pytest.raises(tf.ArgumentError, match="max_to_keep"):
            tf.train.CheckpointManager(tf.train.Checkpoint(w=w), "/tmp", max_to_keep=0)
    finally:
        tf.dispose([w, s])


def test_manager_keeps_the_newest_and_resumes_from_the_latest(tmp_path):
    model, opt = Model(), tf.train.sgd(0.1)
    ckpt = tf.train.Checkpoint(optimizer=opt, model=model.variables())
    made = []
    mgr = tf.train.CheckpointManager(ckpt, tmp_path, max_to_keep=3,
                                     init_fn=lambda: made.append(1))
    try:
        assert mgr.restore_or_initialize() is None and made == [1]
        hook = mgr.save_every_n_steps(2, optimizer=opt)
        paths = []
        for _ in range(10):
            opt.minimize(model.loss)
            p = hook()
            if p is not None:
                paths.append(p)
        assert [os.path.basename(p) for p in paths] == [f"ckpt-{i}.safetensors"
                                                        for i in range(1, 6)]
        assert mgr.checkpoints == paths[-3:] and mgr.latest_checkpoint == paths[-1]
        assert tf.train.latest_checkpoint(tmp_path) == paths[-1]
        want = _state(opt, model)
        _train(opt, model, 3)
        # a new manager over the same folder (a new process would do this)
        mgr2 = tf.train.CheckpointManager(ckpt, tmp_path, max_to_keep=3)
        assert mgr2.restore_or_initialize() == paths[-1]
        assert _state(opt, model) == want and opt.iterations == 10
        assert mgr2.save().endswith("ckpt-6.safetensors")
        assert tf.train.latest_checkpoint(tmp_path, "ckpt").endswith("ckpt-6.safetensors")
        assert tf.train.latest_checkpoint(tmp_path, "other") is None
        # stray temporary files of an interrupted save are cleared by the next save
        (tmp_path / ".ckpt-7.safetensors.abc.tmp").write_bytes(b"half")
        mgr2.save()
        assert not [f for f in os.listdir(tmp_path) if f.endswith(".tmp")]
    finally:
        model.dispose()
        opt.dispose()


def test_the_random_state_is_restored(tmp_path):
    w = tf.variable(tf.scalar(1.0))
    try:
        ckpt = tf.train.Checkpoint(w=w)
        path = ckpt.save(tmp_path / "r")
        want = tf.random_normal([5]).numpy()
        ckpt.restore(path)
        np.testing.assert_array_equal(tf.random_normal([5]).numpy(), want)
    finally:
        w.dispose()


def test_the_file_is_plain_safetensors_with_a_manifest(tmp_path):
    from safetensors.numpy import load_file
    w = tf.variable(tf.tensor([[1.0, 2.0]]))
    opt = tf.train.momentum(0.1, 0.9)
    try:
        opt.minimize(lambda: w.square().sum())
        path = tf.train.Checkpoint(net={"w": w}, opt=opt).save(tmp_path / "plain")
        arrays = load_file(path)
        np.testing.assert_array_equal(arrays["net/w"], w.numpy())
        # momentum's slot after one step from zero: the gradient 2w, by hand
        np.testing.assert_allclose(arrays["opt.slots/net/w/momentum"], [[2.0, 4.0]])
        data = open(path, "rb").read()
        n = int.from_bytes(data[:8], "little")
        manifest = json.loads(json.loads(data[8:8 + n])["__metadata__"]["flowgrad"])
        assert manifest["optimizers"]["opt"]["class"] == "Momentum"
        assert manifest["optimizers"]["opt"]["config"]["momentum"] == 0.9
        assert manifest["optimizers"]["opt"]["iterations"] == 1
        assert manifest["variables"]["net/w"]["shape"] == [1, 2]
    finally:
        w.dispose()
        opt.dispose()


def test_an_interrupt_at_any_point_of_a_restore_restores_all_or_nothing(tmp_path):
    from test_atomic_updates import run_interrupted
    model, opt, ckpt, path = _setup(tmp_path)
    try:
        here = ckpt.save(tmp_path / "here")            # the live state, to go back to
        before = _state(opt, model)
        ckpt.restore(path)
        after = _state(opt, model)
        assert before != after
        ckpt.restore(here)
        n = run_interrupted(lambda: ckpt.restore(path), None).n
        ckpt.restore(here)
        seen = set()
        for k in range(1, n + 1, max(1, n // 60)):
            t = run_interrupted(lambda: ckpt.restore(path), k)
            got = _state(opt, model)
            assert got in (before, after), f"half a restore after an interrupt at {k} of {n}"
            seen.add(got == after)
            assert t.fired
            ckpt.restore(here)
        assert seen == {False, True}
    finally:
        model.dispose()
        opt.dispose()
