"""``kill -9`` during a CheckpointManager save loop (issue #16): whatever moment the kill
lands on (in a save's write, fsync, rename or pruning), the folder's newest
checkpoint is whole, ``latest_checkpoint`` names a whole one, and stray temporary files do
not get in the way.

A subprocess resumes from the folder, then loops: one optimizer step, the variables set to
the step count, ``manager.save()``, "saved N" on stdout. It is killed with SIGKILL at a
seeded random moment; this process then restores with its own manager and checks that the
checkpoint is verified (a damaged file raises CheckpointError), consistent (the values, the
step count and the file's number agree) and no older than the last save the child reported
as done.
"""
import os
import random
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import flowgrad as tf

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="no SIGKILL (Windows)")

N = 500_000                                 # 2 MB a variable: 8 MB a checkpoint with slots
KEEP = 3
CHILD = f"""
import sys
import flowgrad as tf
w = tf.variable(tf.zeros([{N}]))
v = tf.variable(tf.zeros([{N}]))
opt = tf.train.momentum(0.1, 0.9)
ckpt = tf.train.Checkpoint(optimizer=opt, w=w, v=v)
manager = tf.train.CheckpointManager(ckpt, sys.argv[1], max_to_keep={KEEP})
manager.restore_or_initialize()
print("resumed", opt.iterations, flush=True)
while True:
    opt.minimize(lambda: (w * v).sum() + w.sum() - v.sum())
    w.assign(tf.fill([{N}], float(opt.iterations)))
    v.assign(tf.fill([{N}], -float(opt.iterations)))
    path = manager.save()
    print("saved", opt.iterations, path, flush=True)
"""


def _check(folder):
    """Restore each checkpoint kept in the folder, then the newest with
    restore_or_initialize(), into fresh objects; check that each agrees with itself (the
    values are its step count) and that the newest is what latest_checkpoint names. The
    newest's step count."""
    w, v = tf.variable(tf.ones([N])), tf.variable(tf.ones([N]))
    opt = tf.train.momentum(0.1, 0.9)
    ckpt = tf.train.Checkpoint(optimizer=opt, w=w, v=v)
    manager = tf.train.CheckpointManager(ckpt, folder, max_to_keep=KEEP)

    def consistent(path):
        step = opt.iterations
        np.testing.assert_array_equal(w.numpy(), np.full(N, step, np.float32), err_msg=path)
        np.testing.assert_array_equal(v.numpy(), np.full(N, -step, np.float32), err_msg=path)
        return step

    try:
        kept = manager.checkpoints
        assert 1 <= len(kept) <= KEEP + 1, kept     # + the newest, if killed before pruning
        steps = []
        for p in kept:                              # verified: a damaged one raises
            ckpt.restore(p)
            steps.append(consistent(p))
        assert steps == sorted(steps), (kept, steps)
        path = manager.restore_or_initialize()
        assert path is not None and path == manager.latest_checkpoint == \
            tf.train.latest_checkpoint(folder), path
        return consistent(path)
    finally:
        w.dispose()
        v.dispose()
        opt.dispose()


def test_kill_9_during_save_loop_leaves_a_whole_checkpoint(tmp_path):
    folder = str(tmp_path / "run")
    rng = random.Random(16)
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    last_step = 0
    for round_ in range(6):
        if round_ == 3:                         # a stray temp file of an older crash
            with open(os.path.join(folder, ".ckpt-999.safetensors.x1y2.tmp"), "wb") as f:
                f.write(b"\x10\x00\x00\x00\x00\x00\x00\x00{\"__meta")
        proc = subprocess.Popen([sys.executable, "-c", CHILD, folder], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            first = proc.stdout.readline().split()
            assert first[:1] == ["resumed"], first + [proc.stderr.read()]
            assert int(first[1]) == last_step          # it resumed where the last one was
            line = proc.stdout.readline()              # one save done: then kill at random
            assert line.startswith("saved"), line + proc.stderr.read()
            time.sleep(rng.uniform(0, 0.25))
            proc.send_signal(signal.SIGKILL)
            rest = proc.stdout.read()
        finally:
            proc.kill()
            proc.wait()
            proc.stdout.close()
            proc.stderr.close()
        assert proc.returncode == -signal.SIGKILL
        saved = [int(ln.split()[1]) for ln in [line, *rest.splitlines()]
                 if ln.startswith("saved ")]
        step = _check(folder)
        assert step >= max(saved), (step, saved)       # no save reported done is lost
        assert step <= max(saved) + 1                  # (the one under way may be whole)
        last_step = step
    assert last_step >= 6
    # the stray file of round 3 was cleaned up by a later save, temp files or not
    assert ".ckpt-999.safetensors.x1y2.tmp" not in os.listdir(folder)
