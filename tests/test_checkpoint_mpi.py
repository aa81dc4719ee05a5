"""Checkpoints under tf.distributed (issue #16): a 2-rank job saves with a CheckpointManager
(only rank 0 writes), stops, and a second 2-rank job restores on every rank and continues:
both ranks end with identical weights, and every loss equals, bit for bit, that of a 2-rank
run that never stopped. Each mpiexec has a hard 60 s timeout (tests/test_distributed.py's
launcher; skipped with the reason where mpi4py or mpiexec is missing)."""
import numpy as np
import pytest

from test_distributed import mpiexec, run_ranks  # noqa: F401  (mpiexec is a fixture)

TOTAL, STOP = 20, 10            # 20 Adam steps; the first job stops after 10 (saved at 9)


def _job(mpiexec, mode, folder, out, stop):      # noqa: F811
    rc, log = run_ranks(mpiexec, "checkpoint_resume.py", mode, str(folder), str(out),
                        str(stop), timeout=60)
    assert rc == 0, log
    return [dict(np.load(f"{out}.rank{r}.npz")) for r in range(2)]


def _same_weights(a, b, what):
    names = sorted(k for k in a if k.startswith("final/"))
    assert names and names == sorted(k for k in b if k.startswith("final/"))
    for n in names:
        np.testing.assert_array_equal(a[n], b[n], err_msg=f"{what}: {n}")


def test_two_ranks_resume_from_a_checkpoint_as_if_never_stopped(mpiexec, tmp_path):  # noqa: F811
    ref = _job(mpiexec, "fresh", tmp_path / "ref", tmp_path / "ref", TOTAL)
    first = _job(mpiexec, "fresh", tmp_path / "run", tmp_path / "first", STOP)
    resumed = _job(mpiexec, "resume", tmp_path / "run", tmp_path / "resumed", TOTAL)

    for job in (ref, first, resumed):
        assert int(job[0]["writes"]) > 0 and int(job[1]["writes"]) == 0   # rank 0 writes
        assert int(job[0]["checkpoints"]) == int(job[1]["checkpoints"]) == 2  # max_to_keep
    _same_weights(ref[0], ref[1], "the uninterrupted run, rank 0 vs rank 1")
    assert len(ref[0]["losses"]) == TOTAL and ref[0]["losses"][-1] < ref[0]["losses"][0]

    last_save = STOP // 3 * 3
    for r in range(2):
        assert int(first[r]["start"]) == 0 and int(first[r]["iterations"]) == STOP
        np.testing.assert_array_equal(first[r]["losses"], ref[r]["losses"][:STOP])
        # every rank restored the step count, weights and Adam's moments of step 9
        assert int(resumed[r]["start"]) == last_save, resumed[r]["start"]
        assert int(resumed[r]["iterations"]) == TOTAL
        np.testing.assert_array_equal(resumed[r]["losses"], ref[r]["losses"][last_save:],
                                      err_msg=f"rank {r}: losses after resuming")
        _same_weights(resumed[r], ref[0], f"rank {r} resumed vs the uninterrupted run")
