"""TensorBoard event files of a GradientMonitor (tensorboardX: ``pip install
'flowgrad[tensorboard]'``): what ``m.to_tensorboard(logdir)`` writes."""
import math

from ..distributed.runtime import is_root
from ..arg_checks import flag
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


def write_step(m, writer, i, ratios_only=False):
    """Write recorded step ``i`` (index) of monitor ``m`` with a tensorboardX writer."""
    step = m._steps[i]
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
