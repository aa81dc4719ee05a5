"""``tf.train``: optimizers, learning-rate schedules, gradient clipping and checkpoints."""
from .checkpoint import Checkpoint, CheckpointManager, latest_checkpoint
from .clipping import clip_by_global_norm, clip_by_norm, global_norm
from .optimizers import (AdadeltaOptimizer, AdagradOptimizer, AdamaxOptimizer, AdamOptimizer,
                         AdamWOptimizer, ConfigDict, MomentumOptimizer, NonFiniteGradientWarning,
                         Optimizer, RMSPropOptimizer, SGDOptimizer, adadelta, adagrad, adam,
                         adamax, adamw, momentum, rmsprop, sgd)
from .progress import Progress, progress
from .schedules import (CosineDecay, ExponentialDecay, PiecewiseConstant, Schedule, Warmup,
                        cosine_decay, exponential_decay, piecewise_constant, warmup)
from ..camel_case import camel_to_snake as _camel_to_snake

__all__ = sorted(n for n in globals() if not n.startswith("_"))


def __getattr__(name):
    snake = _camel_to_snake(name)
    if snake != name and snake in globals():
        return globals()[snake]
    raise AttributeError(f"module 'flowgrad.train' has no attribute '{name}'")
