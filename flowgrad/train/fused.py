"""Fused optimizer updates: one kernel per variable and step, updating the optimizer's own
slot arrays in place and allocating only the variable's new value.

The arithmetic is that of each optimizer's op-by-op rule (``_update`` in optimizers.py),
in the same order, so the results are the same to the bit; what changes is that a step
costs a handful of NumPy calls and no temporaries the size of the weights. Used when no
gradient function is recording (an update inside one is differentiated op by op).

NOTE: in-place updates are safe only on arrays nobody else holds: slots are created by the
optimizer, set_weights copies into them and get_weights copies out of them.
"""
from .. import engine as E
from ..ops._core import primitive


EPSILON = 1e-7          # TF.js cpu backend's epsilon(): the default of every epsilon


@primitive("ApplyUpdate")
def _apply_update(B, w, g, *slots, rule, opt):
    # the step and the learning rate are read when the kernel runs, so a tf.jit replay of
    # a training step sees them change
    t = opt.iterations + 1
    lr = opt.current_learning_rate()
    if w.ndim == 0:
        # NOTE: ufuncs on 0-d arrays return scalars, which cannot take out=: work on
        # 1-element views (writes go through to the slots) and give back a 0-d result
        new = rule(B, opt, w.reshape(1), B.reshape(g, (1,)),
                   tuple(s.reshape(1) for s in slots), lr, t)
        return new.reshape(())
    return rule(B, opt, w, g, slots, lr, t)


def run(rule, opt, var, g, slots):
    """The new value of ``var`` (a tensor); the slot variables are updated in place."""
    return E.run_kernel(_apply_update, (var, g) + tuple(slots.values()),
                        {"rule": rule, "opt": opt})


@primitive("ApplyUpdateStep")
def _tick(B, opt):
    opt.iterations += 1
    return B.asarray(opt.iterations, dtype=B.int32)


def tick(opt):
    """Count the step, as a kernel (so that a tf.jit replay counts it too)."""
    E.run_kernel(_tick, (), {"opt": opt})


def _step(B, u, lr, w):
    """u * -lr + w, in u (a fresh array the caller owns)."""
    B.multiply(u, -lr, out=u)
    return B.add(u, w, out=u)


def sgd(B, opt, w, g, slots, lr, t):
    return B.add(B.multiply(g, -lr), w)


def momentum(B, opt, w, g, slots, lr, t):
    (acc,) = slots
    m = opt.momentum
    B.multiply(acc, m, out=acc)
    B.add(acc, g, out=acc)
    if opt.use_nesterov:
        u = B.multiply(acc, m)
        B.add(g, u, out=u)
        return _step(B, u, lr, w)
    return _step(B, acc.copy(), lr, w)


def adagrad(B, opt, w, g, slots, lr, t):
    (acc,) = slots
    B.add(acc, B.square(g), out=acc)
    u = B.add(acc, EPSILON)
    B.sqrt(u, out=u)
    B.divide(g, u, out=u)
    return _step(B, u, lr, w)


def adadelta(B, opt, w, g, slots, lr, t):
    eg, ex = slots
    rho, eps = opt.rho, opt.epsilon
    g2 = B.square(g)
    B.multiply(g2, 1 - rho, out=g2)
    new_eg = B.multiply(eg, rho)
    B.add(new_eg, g2, out=new_eg)
    den = B.add(new_eg if opt.use_updated_accumulator else eg, eps)
    B.sqrt(den, out=den)
    delta = B.add(ex, eps)
    B.sqrt(delta, out=delta)
    B.divide(delta, den, out=delta)
    B.multiply(delta, g, out=delta)
    B.multiply(ex, rho, out=ex)
    B.square(delta, out=den)
    B.multiply(den, 1 - rho, out=den)
    B.add(ex, den, out=ex)
    eg[...] = new_eg
    return _step(B, delta, lr, w)


def _moments(B, opt, g, m, v, t):
    b1, b2 = opt.beta1, opt.beta2
    B.multiply(m, b1, out=m)
    B.add(m, B.multiply(g, 1 - b1), out=m)
    tmp = B.square(g)
    B.multiply(tmp, 1 - b2, out=tmp)
    B.multiply(v, b2, out=v)
    B.add(v, tmp, out=v)
    u = B.divide(m, 1 - b1 ** t)
    B.divide(v, 1 - b2 ** t, out=tmp)
    B.sqrt(tmp, out=tmp)
    B.add(tmp, opt.epsilon, out=tmp)
    B.divide(u, tmp, out=u)
    return u, tmp


def adam(B, opt, w, g, slots, lr, t):
    m, v = slots
    u, _ = _moments(B, opt, g, m, v, t)
    return _step(B, u, lr, w)


def adamw(B, opt, w, g, slots, lr, t):
    m, v = slots
    u, tmp = _moments(B, opt, g, m, v, t)
    B.multiply(w, opt.weight_decay, out=tmp)
    B.add(u, tmp, out=u)
    return _step(B, u, lr, w)


def adamax(B, opt, w, g, slots, lr, t):
    m, u = slots
    b1 = opt.beta1
    step_lr = -lr / (opt.iterations * opt.decay + 1)
    B.multiply(m, b1, out=m)
    B.add(m, B.multiply(g, 1 - b1), out=m)
    B.multiply(u, opt.beta2, out=u)
    B.maximum(u, B.abs(g), out=u)
    r = B.add(u, opt.epsilon)
    B.divide(m, r, out=r)
    B.multiply(r, step_lr / (1 - b1 ** t), out=r)
    return B.add(r, w, out=r)


def rmsprop(B, opt, w, g, slots, lr, t):
    rho = opt.decay
    ms, mom = slots[0], slots[1]
    tmp = B.square(g)
    B.multiply(tmp, 1 - rho, out=tmp)
    B.multiply(ms, rho, out=ms)
    B.add(ms, tmp, out=ms)
    if opt.centered:
        mg = slots[2]
        B.multiply(mg, rho, out=mg)
        B.add(mg, B.multiply(g, 1 - rho), out=mg)
        B.square(mg, out=tmp)
        B.add(tmp, opt.epsilon, out=tmp)
        B.subtract(ms, tmp, out=tmp)
    else:
        B.add(ms, opt.epsilon, out=tmp)
    B.sqrt(tmp, out=tmp)
    num = B.multiply(g, lr)
    B.divide(num, tmp, out=num)
    B.multiply(mom, opt.momentum, out=mom)
    B.add(mom, num, out=mom)
    return B.subtract(w, mom)
