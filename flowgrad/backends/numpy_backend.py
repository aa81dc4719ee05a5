"""The NumPy backend: NumPy's namespace plus the functions NumPy lacks."""
import types

import numpy as np

from .memory import tune_malloc

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


def _poly(x, coefs, monic=False):
    acc = np.ones_like(x) if monic else np.full_like(x, coefs[0])
    for c in (coefs if monic else coefs[1:]):
        acc = acc * x + c
    return acc


def erf(x):
    """Elementwise error function, computed in float64 and returned in x's dtype."""
    dtype = x.dtype
    x = np.asarray(x, dtype=np.float64)
    a = np.abs(x)
    out = np.empty_like(x)
    small = a <= 1.0
    if small.any():
        xs = x[small]
        z = xs * xs
        out[small] = xs * _poly(z, _T) / _poly(z, _U, monic=True)
    big = ~small
    if big.any():
        # NOTE: past |x| = 27, exp(-x^2) underflows to 0 anyway; clamping keeps the
        # polynomials finite (inf/inf would give NaN at x = inf).
        ab = np.minimum(a[big], 27.0)
        with np.errstate(under="ignore"):
            e = np.exp(-ab * ab)
            mid = ab < 8.0
            ratio = np.where(mid, _poly(ab, _P) / _poly(ab, _Q, monic=True),
                             _poly(ab, _R) / _poly(ab, _S, monic=True))
        out[big] = np.copysign(1.0 - e * ratio, x[big])
    # NaN stays NaN: neither branch selects it, so copy it through
    nan = np.isnan(x)
    if nan.any():
        out[nan] = np.nan
    return out.astype(dtype, copy=False)


def make_numpy_backend():
    """The ``numpy`` module's namespace (array-API names included, NumPy >= 2.1), ``erf``,
    and the backend's metadata (see backends/__init__.py). Making it tunes malloc so that
    big temporaries reuse freed memory (see backends/memory.py)."""
    tune_malloc()
    ns = types.SimpleNamespace(**{k: v for k, v in vars(np).items() if not k.startswith("_")})
    ns.name = "numpy"
    ns.erf = erf
    ns.np = np
    ns.dtypes = {"float32": np.dtype(np.float32), "float64": np.dtype(np.float64),
                 "int32": np.dtype(np.int32), "bool": np.dtype(np.bool_)}
    # NOTE: ufuncs on 0-d arrays return NumPy scalars: those are this backend's arrays too
    ns.array_types = (np.ndarray, np.float32, np.float64, np.int32, np.bool_)
    ns.to_numpy = _same
    ns.from_numpy = _same
    ns.supports_out = True
    ns.device_bytes = _no_device
    return ns


def _same(a):
    return a


def _no_device():
    return None
