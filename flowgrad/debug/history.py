"""What a GradientMonitor recorded, as NumPy arrays (``m.history``)."""
import numpy as np

from ..errors import ArgumentError
from .instruments import PER_VARIABLE

METRICS = ("grad_norm", "max_abs", "zero_fraction", "nan_count", "inf_count", "update_ratio",
           "weight_norm")


class History:
    """What a monitor recorded, as NumPy arrays over steps: ``steps``, ``loss``,
    ``global_norm`` (the L2 norm of all gradients together), and per variable name a dict
    metric -> array (``h["w"]["grad_norm"]``); ``matrix(metric)`` stacks one metric as
    variables × steps. A step where a variable had no gradient holds NaN.

    With instruments (``tf.debug.monitor(opt, instruments=...)``): ``instruments`` maps each
    scalar instrument (``alpha``, ``norm_test``, ``trace``...) to an array over the same
    steps, NaN where the schedule skipped the step; ``instrument_steps`` are the steps
    measured; ``h[name]`` also holds the per-variable ``distance``, ``update_size`` and
    ``trace``; ``histograms`` maps a measured step to the ``(edges, counts)`` of every
    example's gradient entries (``grad_hist``). Without instruments all are empty.

    >>> h = History([0, 1], [2.0, 1.0], [0.5, 0.25], {"w": {"grad_norm": [0.5, 0.25]}})
    >>> h["w"]["grad_norm"], h.names
    (array([0.5 , 0.25]), ['w'])
    """

    def __init__(self, steps, loss, global_norm, variables, instruments=None,
                 histograms=None):
        self.steps = np.asarray(steps, dtype=np.int64)
        self.loss = np.asarray(loss, dtype=np.float64)
        self.global_norm = np.asarray(global_norm, dtype=np.float64)
        self.variables = {n: {k: np.asarray(v, dtype=np.float64) for k, v in m.items()}
                          for n, m in variables.items()}
        self.instruments = {k: np.asarray(v, dtype=np.float64)
                            for k, v in (instruments or {}).items()}
        self.histograms = dict(histograms or {})

    @property
    def instrument_steps(self):
        """The steps where the instruments measured something (an int array).

        >>> History([0, 1], [1.0, 0.5], [1.0, 0.5], {}, {"alpha": [0.2, np.nan]}
        ...         ).instrument_steps
        array([0])
        """
        if not self.instruments:
            return self.steps[:0]
        seen = np.zeros(len(self.steps), dtype=bool)
        for v in self.instruments.values():
            seen |= ~np.isnan(v)
        return self.steps[seen]

    @property
    def names(self):
        """The variable names, in the order they were first seen."""
        return list(self.variables)

    def __getitem__(self, name):
        if name not in self.variables:
            raise KeyError(f"no variable '{name}' in the history (it has: "
                           f"{', '.join(self.variables) or 'none'})")
        return self.variables[name]

    def __contains__(self, name):
        return name in self.variables

    def __iter__(self):
        return iter(self.variables)

    def __len__(self):
        return len(self.steps)

    def keys(self):
        """The variable names (as ``names``)."""
        return self.names

    def matrix(self, metric="grad_norm"):
        """One metric as a (variables, steps) array, rows in ``names`` order.

        >>> History([0], [1.0], [2.0], {"a": {"grad_norm": [2.0]}}).matrix().shape
        (1, 1)
        """
        extra = [k for k in PER_VARIABLE if any(k in m for m in self.variables.values())]
        if type(metric) is not str or metric not in METRICS + tuple(extra):
            raise ArgumentError(f"History.matrix(metric): unknown metric {metric!r}; the "
                                f"metrics are {', '.join(METRICS + tuple(extra))}")
        if not self.variables:
            return np.zeros((0, len(self.steps)))
        nan = np.full(len(self.steps), np.nan)
        return np.stack([m.get(metric, nan) for m in self.variables.values()])

    def __repr__(self):
        return f"History({len(self.steps)} steps, variables {self.names})"
