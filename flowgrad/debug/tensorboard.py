"""TensorBoard event files of a GradientMonitor (tensorboardX: ``pip install
'flowgrad[tensorboard]'``): what ``m.to_tensorboard(logdir)`` writes."""
import math

import numpy as np

from ..arg_checks import flag
from ..distributed.runtime import is_root
from .extras import check_path, hist_edges, require


def write_tensorboard(m, logdir, live=False):
    """What ``GradientMonitor.to_tensorboard`` does (see there); returns the logdir."""
    logdir = check_path(logdir, "logdir", "GradientMonitor.to_tensorboard(logdir)",
                        folder=True)
    live = flag(live, "live", "GradientMonitor.to_tensorboard()")
    tbx = require("tensorboardX", "tensorboard", "TensorBoard logs")
    if not is_root():          # one set of event files per run, not one per rank
        return str(logdir)
    writer = tbx.SummaryWriter(logdir=str(logdir), flush_secs=5 if live else 120)
    for i in range(m.steps):
        write_step(m, writer, i)
    writer.flush()
    if live:
        m._live.append(writer)
    else:
        writer.close()
    return str(logdir)


# the instruments measured after the step's update (written with the update ratios)
AFTER_UPDATE = ("alpha", "update_size")


def write_step(m, writer, i, ratios_only=False):
    """Write recorded step ``i`` (index) of monitor ``m`` with a tensorboardX writer; with
    ``ratios_only`` only what is measured after the update (update ratios, α, update
    sizes)."""
    step = m._steps[i]
    write_instruments(m, writer, i, ratios_only)
    if not ratios_only:
        if not math.isnan(m._loss[i]):
            writer.add_scalar("loss", m._loss[i], step)
        writer.add_scalar("grad_norm/global", m._global_norm(i), step)
    for n, vals in m._rows[i].items():
        if not math.isnan(vals[5]):
            writer.add_scalar(f"update_ratio/{n}", vals[5], step)
        if ratios_only:
            continue
        if not math.isnan(vals[0]):
            writer.add_scalar(f"grad_norm/{n}", vals[0], step)
        h = m._hists.get(i, {}).get(n)
        if h is not None:
            _, counts, lo, hi, num, s, s2 = h
            writer.add_histogram_raw(f"grads/{n}", lo, hi, num, s, s2,
                                     hist_edges(h)[1:].tolist(), counts.tolist(), step)


def write_instruments(m, writer, i, after_only=False):
    """The instruments of recorded step ``i``: scalars ``cockpit/<instrument>``, per
    variable ``cockpit/<instrument>/<variable>``, the histogram ``cockpit/grad_hist``
    (``after_only``: only those measured after the update, ``AFTER_UPDATE``)."""
    ins = m._instruments
    if ins is None or i not in ins.values:
        return
    step = m._steps[i]
    for k, v in ins.values[i].items():
        if (k in AFTER_UPDATE or not after_only) and not math.isnan(v):
            writer.add_scalar(f"cockpit/{k}", v, step)
    for name, vals in ins.per_variable.get(i, {}).items():
        for k, v in vals.items():
            if (k in AFTER_UPDATE or not after_only) and not math.isnan(v):
                writer.add_scalar(f"cockpit/{k}/{name}", v, step)
    hist = ins.histograms.get(step)
    if hist is not None and not after_only:
        edges, counts = hist
        centers = (edges[:-1] + edges[1:]) / 2
        writer.add_histogram_raw("cockpit/grad_hist", float(edges[0]), float(edges[-1]),
                                 int(counts.sum()), float(np.sum(centers * counts)),
                                 float(np.sum(centers ** 2 * counts)), edges[1:].tolist(),
                                 counts.tolist(), step)
