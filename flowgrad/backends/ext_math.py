"""Array-API extensions used by the kernels of unary, activations, binary and logical ops
(see ext.py): ``erf``, which the standard lacks, ``softplus`` and ``relu_grad``, which
NumPy does several times faster its own way, the fused gradients of sin, cos, tanh and
square (``sin_grad``, ``cos_grad``, ``tanh_grad``, ``square_grad``), which take ``out=``
like a ufunc, and ``fast_pow``.

>>> import numpy as np
>>> from flowgrad.backends import namespace
>>> B = namespace("numpy")
>>> B.erf(np.array([0.0, 1.0])).round(6).tolist()
[0.0, 0.842701]
>>> B.softplus(np.array([-100.0, 0.0, 100.0])).round(6).tolist()
[0.0, 0.693147, 100.0]
>>> B.relu_grad(np.array([2.0, 2.0, 2.0]), np.array([-1.0, 0.0, np.nan])).tolist()
[0.0, 0.0, nan]
>>> B.sin_grad(np.array([2.0]), np.array([0.0])).tolist()
[2.0]
"""
import numpy as np

# ---------------------------------------------------------------- erf

# Rational approximations of erf and erfc (Cephes, S. L. Moshier): erf(x) = x T(x^2)/U(x^2)
# on |x| <= 1, erfc(x) = exp(-x^2) P(x)/Q(x) on 1 < x < 8 and exp(-x^2) R(x)/S(x) beyond.
# U, Q and S are monic: their leading 1 is not listed. Relative error below 1e-15.
_T = (9.60497373987051638749E0, 9.00260197203842689217E1, 2.23200534594684319226E3,
      7.00332514112805075473E3, 5.55923013010394962768E4)
_U = (3.35617141647503099647E1, 5.21357949780152679795E2, 4.59432382970980127987E3,
      2.26290000613890934246E4, 4.92673942608635921086E4)
_P = (2.46196981473530512524E-10, 5.64189564831068821977E-1, 7.46321056442269912687E0,
      4.86371970985681366614E1, 1.96520832956077098242E2, 5.26445194995477358631E2,
      9.34528527171957607540E2, 1.02755188689515710272E3, 5.57535335369399327526E2)
_Q = (1.32281951154744992508E1, 8.67072140885989742329E1, 3.54937778887819891062E2,
      9.75708501743205489753E2, 1.82390916687909736289E3, 2.24633760818710981792E3,
      1.65666309194161350182E3, 5.57535340817727675546E2)
_R = (5.64189583547755073984E-1, 1.27536670759978104416E0, 5.01905042251180477414E0,
      6.16021097993053585195E0, 7.40974269950448939160E0, 2.97886665372100240670E0)
_S = (2.26052863220117276590E0, 9.39603524938001434673E0, 1.20489539808096656605E1,
      1.70814450747565897222E1, 9.60896809063285878198E0, 3.36907645100081516050E0)
# NOTE: past |x| = 27, exp(-x^2) underflows to 0 anyway; clamping there keeps the
# polynomials finite (inf/inf would give NaN at x = inf)
_BIG = 27.0


def _poly(B, x, coefs, monic=False):
    acc = B.ones_like(x) if monic else B.full_like(x, coefs[0])
    for c in (coefs if monic else coefs[1:]):
        acc = acc * x + c
    return acc


def _erfc_ratio(B, ab):
    """erfc(ab) / exp(-ab^2) for 1 <= ab <= 27."""
    return B.where(ab < 8.0, _poly(B, ab, _P) / _poly(B, ab, _Q, True),
                   _poly(B, ab, _R) / _poly(B, ab, _S, True))


def erf(B, x):
    """Elementwise error function, computed in float64 and returned in x's dtype. Both
    branches run on every element (no data-dependent shapes), each on inputs clamped to its
    own range so the other branch's elements stay finite; NaN propagates through the
    second."""
    dtype = x.dtype
    x = B.astype(x, B.dtypes["float64"], copy=False)
    a = B.abs(x)
    xs = B.clip(x, -1.0, 1.0)
    z = xs * xs
    small = xs * _poly(B, z, _T) / _poly(B, z, _U, True)
    ab = B.clip(a, 1.0, _BIG)
    big = B.copysign(1.0 - B.exp(-ab * ab) * _erfc_ratio(B, ab), x)
    return B.astype(B.where(a <= 1.0, small, big), dtype, copy=False)


def _erf_numpy(x):
    # each branch only on its elements
    dtype = x.dtype
    x = np.asarray(x, dtype=np.float64)
    a = np.abs(x)
    out = np.empty_like(x)
    small = a <= 1.0
    if small.any():
        xs = x[small]
        z = xs * xs
        out[small] = xs * _poly(np, z, _T) / _poly(np, z, _U, True)
    big = ~small
    if big.any():
        ab = np.minimum(a[big], _BIG)
        with np.errstate(under="ignore"):
            e = np.exp(-ab * ab)
            ratio = np.where(ab < 8.0, _poly(np, ab, _P) / _poly(np, ab, _Q, True),
                             _poly(np, ab, _R) / _poly(np, ab, _S, True))
        out[big] = np.copysign(1.0 - e * ratio, x[big])
    # NaN stays NaN: neither branch selects it, so copy it through
    nan = np.isnan(x)
    if nan.any():
        out[nan] = np.nan
    return out.astype(dtype, copy=False)


def _erf_cupy(x):
    import cupyx.scipy.special as special
    return special.erf(x)


# ---------------------------------------------------------------- softplus

def softplus(B, x):
    """log(1 + e^x) without overflow: max(x, 0) + log1p(e^-|x|), the formula of NumPy's
    logaddexp(0, x)."""
    return B.maximum(x, 0) + B.log1p(B.exp(-B.abs(x)))


_SOFTPLUS_SMALL = 192      # sizes below which one NumPy call beats the formula
_ZEROS = {np.dtype(np.float32): np.float32(0), np.dtype(np.float64): np.float64(0)}


def _softplus_numpy(x):
    # NOTE: np.logaddexp is one call but ~25 ns an element: the formula in place is 8x
    # faster on big arrays, logaddexp is faster on small ones (one call)
    if x.size < _SOFTPLUS_SMALL:
        return np.logaddexp(_ZEROS.get(x.dtype, 0), x)
    t = np.abs(x)
    np.negative(t, out=t)
    np.exp(t, out=t)
    np.log1p(t, out=t)
    return np.add(t, np.maximum(x, 0), out=t)


def _softplus_cupy(x):      # one kernel, not four
    import cupy
    return cupy.logaddexp(x.dtype.type(0), x)


# ---------------------------------------------------------------- relu's gradient

def relu_grad(B, dy, x):
    """dy · step(x), in dy's dtype and the broadcast shape: [conv] 0 at x = 0 (relu'(0) = 0),
    NaN where x is NaN (TF.js: step(NaN) = NaN)."""
    out = dy * B.astype(x > 0, dy.dtype)
    if x.dtype in B.float_dtypes:
        out = B.where(B.isnan(x), B.nan, out)
    return out


_RELU_GRAD_SMALL = 512


def _relu_grad_numpy(dy, x):
    # NOTE: np.heaviside is that step in one call, but branches per element: 10x slower
    # than a mask on big arrays of random signs; 2x faster than the mask and NaN check on
    # small ones. np.where(mask, dy, 0) is 10x slower than multiplying by the mask.
    if x.size < _RELU_GRAD_SMALL and x.dtype == dy.dtype and x.dtype.kind == "f":
        return dy * np.heaviside(x, 0)
    # NOTE: the mask as int8: NumPy's bool-to-float loop is ~1.5x slower than int8's
    out = np.multiply(dy, (x > 0).view(np.int8), dtype=dy.dtype)
    # NOTE: max propagates NaN: one reduction finds one (isnan's mask and any(): 2x slower)
    if x.dtype.kind == "f" and x.size and np.isnan(x.max()):
        out = np.where(np.isnan(x), np.nan, out)
    return out


# ---------------------------------------------------------------- sin', cos', tanh'
# One kernel each instead of two or three (W1, a chain of 200 small ops: one kernel fewer
# in ten). They run the ufuncs of the op-by-op rule in its order, so the bits are the same.
# Like ufuncs they take out= (tf.jit's buffers and fused chains, the buffer pool), and out
# may be one of the inputs: tf.jit writes over an input that dies at this kernel.

def _into(r, out):
    if out is None:
        return r
    out[...] = r
    return out


def sin_grad(B, dy, x, out=None, casting=None):
    """dy · cos x (sin's gradient)."""
    return _into(dy * B.cos(x), out)


def cos_grad(B, dy, x, out=None, casting=None):
    """-(dy · sin x) (cos's gradient)."""
    return _into(-(dy * B.sin(x)), out)


def square_grad(B, dy, x, out=None, casting=None):
    """dy · (x · 2) (square's gradient)."""
    return _into(dy * (x * 2), out)


def tanh_grad(B, dy, y, out=None, casting=None):
    """dy · (1 - y²) (tanh's gradient, from its output y)."""
    return _into(dy * (1 - y * y), out)


def _steps(*steps):
    """Declare a NumPy composite as its ufunc steps, each ``(ufunc name, operands)``:
    "a0", "a1"... its inputs, "r" the result so far, a number a literal. With ``out=`` the
    composite runs them (``_run_steps``); tf.jit's fused chains write them inline (no call
    per block)."""
    def deco(fn):
        fn.steps = steps
        # the inputs read after the first step: out must not be one of them
        fn.later = sorted({int(x[1:]) for _, ops in steps[1:] for x in ops
                           if isinstance(x, str) and x != "r"})
        return fn
    return deco


def _run_steps(fn, ins, out, casting):
    # NOTE: out may be one of the inputs (tf.jit writes over an input that dies at this
    # kernel): when it is one the later steps read, they run in a temporary instead
    r = out
    if any(np.may_share_memory(out, ins[i]) for i in fn.later):
        r = np.empty_like(out)
    last = len(fn.steps) - 1
    for k, (name, ops) in enumerate(fn.steps):
        vals = [r if x == "r" else ins[int(x[1:])] if isinstance(x, str) else x for x in ops]
        getattr(np, name)(*vals, out=out if k == last else r, casting=casting)
    return out


# NOTE: without out= (eager kernels on small arrays, tf.jit's small steps) the rule's own
# operators: ufunc calls with keywords cost more than the second array saves

@_steps(("cos", ("a1",)), ("multiply", ("a0", "r")))
def _sin_grad_numpy(dy, x, out=None, casting="same_kind"):
    if out is None:
        return dy * np.cos(x)
    return _run_steps(_sin_grad_numpy, (dy, x), out, casting)


@_steps(("sin", ("a1",)), ("multiply", ("a0", "r")), ("negative", ("r",)))
def _cos_grad_numpy(dy, x, out=None, casting="same_kind"):
    if out is None:
        return -(dy * np.sin(x))
    return _run_steps(_cos_grad_numpy, (dy, x), out, casting)


@_steps(("multiply", ("a1", 2)), ("multiply", ("a0", "r")))
def _square_grad_numpy(dy, x, out=None, casting="same_kind"):
    if out is None:
        return dy * (x * 2)
    return _run_steps(_square_grad_numpy, (dy, x), out, casting)


@_steps(("multiply", ("a1", "a1")), ("subtract", (1, "r")), ("multiply", ("a0", "r")))
def _tanh_grad_numpy(dy, y, out=None, casting="same_kind"):
    if out is None:
        return dy * (1 - y * y)
    return _run_steps(_tanh_grad_numpy, (dy, y), out, casting)


# ---------------------------------------------------------------- pow by a small exponent

# NOTE: NumPy's power takes a slow path for negative bases (~110 ms for 1e6 values on an
# AVX-512 Xeon, float32 and float64, against 0.3 ms for x*x*x) and even on positive ones is
# several times slower than multiplying. PyTorch specialises integer-valued exponents; so
# does Pow here when its exponent is one number among these. Each form stays within 2 ulp
# of NumPy's power over all magnitudes, signs, zeros, infinities and NaN
# (tests/test_ops_math.py; -4 as (x*x)*(x*x) inverted reached 3 ulp, and 1/x cubed 5, so
# those stay on power).
_SMALL = frozenset((0, 1, 2, 3, 4, -1, -2, -3, 0.5, -0.5))


def small_exponent(a, b):
    """b's value when b is one number of a's float dtype among those the multiplications
    serve (0, ±1, ±2, ±3, 4, ±½), with a result of a's shape; None otherwise."""
    if b.size != 1 or b.ndim > a.ndim or b.dtype != a.dtype or a.dtype.kind != "f":
        return None
    v = b.item()
    return v if v in _SMALL else None


def fast_pow(B, a, b, out=None, casting=None):
    """a ** b, elementwise (the backend's power; NumPy's own specialises small exponents)."""
    return _into(B.pow(a, b), out)


def _fast_pow_numpy(a, b, out=None, casting="same_kind"):
    n = small_exponent(a, b)
    if n is None:
        return np.power(a, b) if out is None else np.power(a, b, out=out, casting=casting)
    if out is None:
        out = np.empty_like(a) if isinstance(a, np.ndarray) else np.empty((), a.dtype)
        scalar = not isinstance(a, np.ndarray)
    else:
        scalar = False
    # (out may be a itself: tf.jit writes over an input that dies here. So a is read only
    # before out is written, or by ufuncs that go element by element)
    if n == 0:
        out[...] = 1                                     # power(nan, 0) is 1 too
    elif n == 1:
        np.positive(a, out=out)
    elif n == 2:
        np.multiply(a, a, out=out)
    elif n == 3:
        np.multiply(np.multiply(a, a), a, out=out)
    elif n == 4:
        sq = np.multiply(a, a)
        np.multiply(sq, sq, out=out)
    elif n == -1:
        np.divide(1, a, out=out)
    elif n == 0.5:
        np.sqrt(a, out=out)               # (NumPy's power(x, ½) is its sqrt: -0, -inf too)
    elif n == -0.5:
        neg_inf = np.isneginf(a)          # NOTE: power(-inf, -½) is 0, 1/sqrt(-inf) NaN
        np.sqrt(a, out=out)
        out += 0.0                        # NOTE: power(-0, -½) is +inf, 1/sqrt(-0) -inf
        if neg_inf.any():
            out[neg_inf] = np.inf
        np.divide(1, out, out=out)
    else:                                 # -2, -3: 1 / a^|n|, where a^|n| is a normal number
        p = np.multiply(a, a)
        if n == -3:
            p *= a
        with np.errstate(invalid="ignore"):
            odd = ~((np.abs(p) >= np.finfo(p.dtype).tiny) & (np.abs(p) < np.inf))
        # NOTE: where a^|n| overflowed or is subnormal (or zero, NaN), 1/p loses what
        # power keeps (a subnormal result, an exact inf): those few elements use power
        fix = np.power(a[odd], b.reshape(())) if odd.any() else None
        np.divide(1, p, out=out)
        if fix is not None:
            out[odd] = fix
    return out[()] if scalar else out


# ---------------------------------------------------------------- what ext.py collects

# the generic implementations, f(B, ...), each under its own name
EXTENSIONS = (erf, softplus, relu_grad, sin_grad, cos_grad, square_grad, tanh_grad, fast_pow)
# the backends' own implementations, f(...) without B: (backend, extension) -> f
OVERRIDES = {
    ("numpy", "erf"): _erf_numpy,
    ("cupy", "erf"): _erf_cupy,
    ("numpy", "softplus"): _softplus_numpy,
    ("cupy", "softplus"): _softplus_cupy,
    ("numpy", "relu_grad"): _relu_grad_numpy,
    ("numpy", "sin_grad"): _sin_grad_numpy,
    ("numpy", "cos_grad"): _cos_grad_numpy,
    ("numpy", "square_grad"): _square_grad_numpy,
    ("numpy", "tanh_grad"): _tanh_grad_numpy,
    ("numpy", "fast_pow"): _fast_pow_numpy,
}
