"""The cost of the monitor's Cockpit instruments (issue #30) on a small MLP (20-64-5, batch
64, float32, SGD), against a plain training step (``opt.minimize`` of the batch's loss):

- a monitor with no instruments against no monitor (what every monitored run pays);
- "economy", "business" and "full" measured at every step (the cost of one measured step:
  economy is two per-example gradient passes, business adds the Hessian trace, full λ_max);
- "economy" and "business" with the default schedule (every step below 10, then 45 per
  decade), amortised over a run of ``RUN`` steps, against a monitor without instruments
  (the instruments' own cost) and against no monitor.

    python -m bench cockpit --reps 5
"""
import numpy as np

import flowgrad as tf

from .timing import measure

BATCH, D_IN, HIDDEN, D_OUT = 64, 20, 64, 5
RUN = 1000


def _model(seed=0):
    r = np.random.default_rng(seed)
    x = tf.tensor(r.standard_normal((BATCH, D_IN)).astype(np.float32))
    y = tf.tensor(np.eye(D_OUT, dtype=np.float32)[r.integers(0, D_OUT, BATCH)])
    init = [(r.standard_normal((D_IN, HIDDEN)) * np.sqrt(2 / D_IN)).astype(np.float32),
            np.zeros(HIDDEN, np.float32),
            (r.standard_normal((HIDDEN, D_OUT)) * np.sqrt(2 / HIDDEN)).astype(np.float32),
            np.zeros(D_OUT, np.float32)]
    vs = [tf.variable(tf.tensor(a), name=f"bench_cockpit_{i}") for i, a in enumerate(init)]

    def logits(xs):
        return xs.mat_mul(vs[0]).add(vs[1]).relu().mat_mul(vs[2]).add(vs[3])

    def batch_loss():
        return tf.losses.softmax_cross_entropy(y, logits(x))

    def example_loss(xi, yi):
        return tf.losses.softmax_cross_entropy(yi.reshape([1, D_OUT]),
                                               logits(xi.reshape([1, D_IN])))

    def reset():
        for v, a in zip(vs, init):
            v.assign(tf.tensor(a))
    return vs, (x, y), batch_loss, example_loss, reset


def cockpit(reps):
    """Rows: each configuration's time per step against a plain step's (ms)."""
    vs, inputs, batch_loss, example_loss, reset = _model()
    opts = {}

    def trainer(name, **options):
        opt = tf.train.sgd(0.05)
        if name != "plain":
            tf.debug.monitor(opt, **options)
        opts[name] = opt
        return lambda: opt.minimize(batch_loss)

    every = {"plain": trainer("plain"), "monitor": trainer("monitor")}
    for config in ("economy", "business", "full"):
        every[config] = trainer(config, instruments=config, loss_fn=example_loss,
                                inputs=inputs, every=1)
    rounds = max(1, reps)
    t = measure(every, rounds, warmup=1)

    # the default schedule over a run of RUN steps, each round a fresh monitor from the
    # same weights (a monitor's schedule counts its own steps)
    def run(config):
        def go():
            reset()
            step = trainer(config, **({} if config in ("plain", "monitor") else {
                "instruments": config, "loss_fn": example_loss, "inputs": inputs}))
            for _ in range(RUN):
                step()
            opts.pop(config).dispose()
        return go
    runs = measure({c: run(c) for c in ("plain", "monitor", "economy", "business")},
                   max(1, rounds // 3), warmup=0)
    for opt in opts.values():
        opt.dispose()
    tf.dispose(vs + list(inputs))
    rows = [("cockpit monitor without instruments vs plain step", t["monitor"], t["plain"],
             1e3, "ms")]
    rows += [(f"cockpit {c} every step vs plain step", t[c], t["plain"], 1e3, "ms")
             for c in ("economy", "business", "full")]
    rows += [(f"cockpit {c}, default schedule ({RUN} steps) vs monitor", runs[c] / RUN,
              runs["monitor"] / RUN, 1e3, "ms") for c in ("economy", "business")]
    rows += [(f"cockpit {c}, default schedule ({RUN} steps) vs plain", runs[c] / RUN,
              runs["plain"] / RUN, 1e3, "ms") for c in ("economy", "business")]
    return rows
