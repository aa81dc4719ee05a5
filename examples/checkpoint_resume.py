"""Train, be killed with ``kill -9``, resume: the losses after resuming are the very bits of
a run that was never stopped.

A small MLP learns which quadrants of the plane are positive (XOR of the signs), with Adam
on shuffled mini-batches. A ``tf.train.CheckpointManager`` saves the weights and the
optimizer's state (its moments and step count) every 10 steps. The run below:

1. trains once without stopping (the reference);
2. trains in a subprocess and kills it with SIGKILL half-way (no clean-up runs: the kill
   may even land in the middle of a save);
3. resumes in this process from the newest whole checkpoint, ``restore_or_initialize()``,
   and trains to the end.

The mini-batch of a step is a function of the step (a seeded shuffle per epoch), and the
step is the optimizer's ``iterations``, restored with it: the resumed run sees the same
batches as the reference. It exits with status 1 if any loss or weight differs by one bit.

    python examples/checkpoint_resume.py            # 300 steps, killed at about step 155
    python examples/checkpoint_resume.py --quick    # 120 steps
"""
import os
import subprocess
import sys
import tempfile

import numpy as np

import flowgrad as tf

SAVE_EVERY, BATCH = 10, 32


def dataset(n=256, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, (n, 2)).astype(np.float32)
    y = ((x[:, 0] * x[:, 1]) > 0).astype(np.float32)[:, None]
    return x, y


def batch_indices(step, n):
    """The rows of step ``step``: epoch e's shuffle (seeded by e), cut into batches."""
    per_epoch = n // BATCH
    epoch, i = divmod(step, per_epoch)
    order = np.random.default_rng([7, epoch]).permutation(n)
    return order[i * BATCH:(i + 1) * BATCH]


def train(directory, steps, log=None):
    """Train to ``steps`` steps, resuming from ``directory``'s newest checkpoint if there
    is one; returns (first step run, {step: loss}, final weights)."""
    x, y = dataset()
    sizes = [(2, 32), (32, 32), (32, 1)]
    layers = [(tf.variable(tf.random_normal(s, 0, 0.5, seed=i)), tf.variable(tf.zeros([s[1]])))
              for i, s in enumerate(sizes)]
    opt = tf.train.adam(0.01)
    ckpt = tf.train.Checkpoint(optimizer=opt, layers=layers)
    manager = tf.train.CheckpointManager(ckpt, directory, max_to_keep=3)
    manager.restore_or_initialize()            # the newest whole checkpoint, if any
    save = manager.save_every_n_steps(SAVE_EVERY)

    def loss(xb, yb):
        h = xb
        for i, (w, b) in enumerate(layers):
            h = h.mat_mul(w).add(b)
            if i < len(layers) - 1:
                h = h.relu()
        return tf.losses.sigmoid_cross_entropy(yb, h)

    start, losses = opt.iterations, {}
    for step in range(start, steps):
        idx = batch_indices(step, len(x))
        cost = tf.tidy(lambda: opt.minimize(
            lambda: loss(tf.tensor(x[idx]), tf.tensor(y[idx])), return_cost=True))
        losses[step] = cost.item()
        cost.dispose()
        if log:
            log(f"step {step} loss {losses[step]!r}")
        save(opt.iterations)                   # a checkpoint every SAVE_EVERY steps
    weights = [v.numpy() for layer in layers for v in layer]
    for w, b in layers:
        w.dispose()
        b.dispose()
    opt.dispose()
    return start, losses, weights


def run_and_kill(directory, steps, kill_at):
    """Train in a subprocess and SIGKILL it once it reports step ``kill_at``; the losses it
    reported."""
    proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker",
                             directory, str(steps)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    seen = {}
    try:
        for line in proc.stdout:
            _, step, _, value = line.split()
            seen[int(step)] = float(value)
            if int(step) >= kill_at:
                proc.kill()                    # SIGKILL: no finally, no atexit, no flush
                break
    finally:
        proc.kill()
        err = proc.stderr.read()
        proc.wait()
        proc.stdout.close()
        proc.stderr.close()
    if not seen or max(seen) < kill_at:
        raise RuntimeError(f"the training subprocess ended early:\n{err}")
    return seen, proc.returncode


def main(quick=False):
    steps = 120 if quick else 300
    kill_at = steps // 2 + SAVE_EVERY // 2     # between two saves: some steps are redone
    with tempfile.TemporaryDirectory(prefix="flowgrad-ckpt-example-") as tmp:
        _, reference, ref_weights = train(os.path.join(tmp, "reference"), steps)
        print(f"reference: {steps} steps without stopping, loss {reference[0]:.4f} -> "
              f"{reference[steps - 1]:.4f}")

        folder = os.path.join(tmp, "run")
        seen, code = run_and_kill(folder, steps, kill_at)
        on_disk = sorted(os.listdir(folder))
        print(f"killed the training process (exit status {code}) after it reported step "
              f"{max(seen)}; in its folder: {', '.join(on_disk)}")

        start, resumed, weights = train(folder, steps)
        print(f"resumed from the checkpoint of step {start}: trained steps {start} to "
              f"{steps - 1}")

    before = all(reference[s] == v for s, v in seen.items())
    after = all(reference[s] == v for s, v in resumed.items())
    same_weights = all(np.array_equal(a, b) for a, b in zip(weights, ref_weights))
    match = (before and after and same_weights and 0 < start <= max(seen) + 1
             and start + len(resumed) == steps)
    print(f"losses before the kill equal the reference: {before}; after resuming: {after}; "
          f"final weights bitwise equal: {same_weights}")
    print("resumed exactly" if match else "MISMATCH: the resumed run differs")
    return {"steps": steps, "killed_after": max(seen), "resumed_from": start,
            "losses_before_kill_match": before, "losses_after_resume_match": after,
            "weights_match": same_weights, "match": match,
            "loss_first": reference[0], "loss_last": reference[steps - 1]}


if __name__ == "__main__":
    if sys.argv[1:2] == ["--worker"]:           # the process that gets killed
        train(sys.argv[2], int(sys.argv[3]), log=lambda s: print(s, flush=True))
    else:
        sys.exit(0 if main(quick="--quick" in sys.argv)["match"] else 1)
