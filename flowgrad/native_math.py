"""exp, sin, cos and tanh of float32 values as straight-line float64 arithmetic, for tf.jit's
native loops (flowgrad/jit_native.py): code LLVM vectorises, where a call of the C library's
``expf``/``sinf`` per element does not (on an AVX2 EPYC: 5.4 ns a value for numba's
``math.exp``, 2.0 for this one inside a loop; NumPy's own float32 ``exp`` there: 5.5 ns).

Each function is computed in float64 from the float32 argument and rounded once to
float32: range reduction (Cody-Waite, with pi/2 and ln 2 split so that ``k * part`` is
exact), then a Taylor polynomial on the reduced argument whose truncation error is below
1e-12 relative, far under float32's half ulp (3e-8). So the result is the correctly
rounded value, or one ulp from it where the exact value lies within ~1e-12 of a rounding
boundary; NumPy's float32 functions are within 1-2 ulp of it, inside jit_native.ULP_BOUND.

Each use comes with a guard: an argument outside the range the reduction is exact for
(|x| > 65536 for sin and cos; exp outside [-103, 88.5], where float32 under- or overflows)
or NaN counts as "bad". A loop that met one runs again with the C library's functions
(jit_native.Segment), so such values get exactly what the plain compiled loop gives.

Only text is made here: this module imports neither numba nor flowgrad.
"""
from __future__ import annotations

import math
import re
from decimal import Decimal, localcontext
from fractions import Fraction

FUNCTIONS = ("exp", "sin", "cos", "tanh")
_CALL = re.compile(r"math\.(exp|sin|cos|tanh)\(")

with localcontext() as _ctx:
    _ctx.prec = 60
    _PIO2 = Decimal("1.5707963267948966192313216916397514420985846996875529104874722961")
    _LN2 = Decimal("0.69314718055994530941723212145817656807550013436025525412068000949")


def _head(v: Decimal, bits: int) -> float:
    """``v``'s leading ``bits`` bits (a float64 whose product with a small integer is
    exact)."""
    m, e = math.frexp(float(v))
    return math.ldexp(math.floor(m * 2 ** bits), e - bits)


def _split(v: Decimal, bits: int) -> tuple[float, float]:
    hi = _head(v, bits)
    with localcontext() as ctx:
        ctx.prec = 60
        return hi, float(v - Decimal(hi))


# NOTE: k <= 41,723 for |x| <= 65536 (16 bits): k * PIO2_HI (33 bits) is exact in float64;
# the low part's rounding and the omitted tail (~1e-27 k) are 1e-12 of the smallest
# reduced argument a float32 input of that range reaches
PIO2_HI, PIO2_LO = _split(_PIO2, 33)
LN2_HI, LN2_LO = _split(_LN2, 32)
SIN_COS_LIMIT = 65536.0
EXP_RANGE = (-103.0, 88.5)
TANH_SMALL = 0.0625     # below: its odd series (1 - 2/(e^2x + 1) would cancel 4+ bits)
TANH_ONE = 20.0         # above: tanh is 1 in float32 (and float64)


def _taylor(first: int, step: int, count: int, sign: int) -> list[float]:
    """sign/first!, sign^2/(first+step)!, sign^3/(first+2 step)!...: ``count`` Taylor
    coefficients."""
    return [float(Fraction(sign ** (i + 1), math.factorial(first + step * i)))
            for i in range(count)]


# |r| <= pi/4: sin to r^11 (the next term is 1e-11 of sin r), cos to r^12 (4e-13);
# |r| <= ln2/2 for exp: to r^11 (6e-15)
_SIN = _taylor(3, 2, 5, -1)         # -1/3!, 1/5!, -1/7!, 1/9!, -1/11!
_COS = _taylor(2, 2, 6, -1)         # -1/2!, 1/4!, ..., -1/12!
_EXP = _taylor(2, 1, 10, 1)         # 1/2!, ..., 1/11!
# tanh(x) = x + x^3 (-1/3 + x^2 (2/15 + ...)) for |x| < 1/16: to x^11 (next: 1e-14 relative)
_TANH = [-1 / 3, 2 / 15, -17 / 315, 62 / 2835, -1382 / 155925]


def _horner(z: str, cs: list[float]) -> str:
    text = repr(cs[-1])
    for c in reversed(cs[:-1]):
        text = f"({c!r} + {z} * {text})"
    return text


def _exp_lines(a: str, u: str, guard: bool = True) -> list[str]:
    """Lines setting ``m{u}`` to exp(``a``) (float64 names); a guard line counts ``a``
    outside EXP_RANGE (or NaN) in ``bad``."""
    lines = [f"k{u} = np.floor({a} * {1 / math.log(2)!r} + 0.5)",
             f"r{u} = ({a} - k{u} * {LN2_HI!r}) - k{u} * {LN2_LO!r}",
             f"p{u} = 1.0 + r{u} + r{u} * r{u} * {_horner('r' + u, _EXP)}",
             # (2^k from its bits; k clamped so that a guarded NaN converts to something)
             f"e{u} = np.int64(np.int32(k{u} if abs(k{u}) <= 1000.0 else 0.0) + "
             f"np.int32(1023)) << 52",
             f"m{u} = p{u} * np.int64(e{u}).view(np.float64)"]
    if guard:
        lo, hi = EXP_RANGE
        lines.append(f"bad += 0 if {lo!r} <= {a} <= {hi!r} else 1")
    return lines


def _sin_cos_lines(a: str, u: str, which: str) -> list[str]:
    """Lines setting ``m{u}`` to sin or cos of ``a``: r = a - k pi/2, then the quadrant
    k mod 4 picks sin(r) or cos(r) and the sign (as arithmetic: selects LLVM vectorises)."""
    lines = [f"k{u} = np.floor({a} * {2 / math.pi!r} + 0.5)",
             f"r{u} = ({a} - k{u} * {PIO2_HI!r}) - k{u} * {PIO2_LO!r}",
             f"z{u} = r{u} * r{u}",
             # (r (1 + z p), not r + r z p: sin(-0.0) is -0.0)
             f"s{u} = r{u} * (1.0 + z{u} * {_horner('z' + u, _SIN)})",
             f"c{u} = 1.0 + z{u} * {_horner('z' + u, _COS)}",
             f"h{u} = np.floor(k{u} * 0.5)"]
    if which == "sin":      # quadrant 1, 3: cos(r); 2, 3: negated
        lines += [f"w{u} = c{u} if k{u} - 2.0 * h{u} != 0.0 else s{u}",
                  f"g{u} = h{u} - 2.0 * np.floor(h{u} * 0.5)"]
    else:                   # quadrant 1, 3: sin(r); 1, 2: negated
        lines += [f"w{u} = s{u} if k{u} - 2.0 * h{u} != 0.0 else c{u}",
                  f"q{u} = np.floor((k{u} + 1.0) * 0.5)",
                  f"g{u} = q{u} - 2.0 * np.floor(q{u} * 0.5)"]
    return lines + [f"m{u} = w{u} * (1.0 - 2.0 * g{u})",
                    f"bad += 0 if abs({a}) <= {SIN_COS_LIMIT!r} else 1"]


def _tanh_lines(a: str, u: str) -> list[str]:
    """Lines setting ``m{u}`` to tanh(``a``): the odd series near 0, else
    1 - 2/(exp(2|a|) + 1) with the sign of a (|a| capped where tanh is 1); NaN is bad."""
    z = f"z{u}"
    lines = [f"b{u} = min(abs({a}), {TANH_ONE!r})", f"d{u} = b{u} + b{u}"]
    lines += _exp_lines(f"d{u}", u + "e", guard=False)
    lines += [f"{z} = {a} * {a}",
              f"y{u} = {a} * (1.0 + {z} * {_horner(z, _TANH)})",
              f"l{u} = 1.0 - 2.0 / (m{u}e + 1.0)",
              f"m{u} = y{u} if abs({a}) < {TANH_SMALL!r} else (-l{u} if {a} < 0.0 else l{u})",
              f"bad += 0 if {a} == {a} else 1"]
    return lines


_LINES = {"exp": _exp_lines, "tanh": _tanh_lines,
          "sin": lambda a, u: _sin_cos_lines(a, u, "sin"),
          "cos": lambda a, u: _sin_cos_lines(a, u, "cos")}


def _argument(expr: str, start: int) -> int:
    """The index of the parenthesis closing the one before ``start``."""
    depth = 1
    for i in range(start, len(expr)):
        if expr[i] == "(":
            depth += 1
        elif expr[i] == ")":
            depth -= 1
            if depth == 0:
                return i
    raise ValueError(f"unbalanced expression: {expr}")


def calls(expr: str) -> list[str]:
    """The functions this module computes that a native expression calls."""
    return _CALL.findall(expr)


def inline(expr: str, prefix: str) -> tuple[list[str], str]:
    """``expr`` (a float32 loop's expression) with each call of exp/sin/cos/tanh replaced by
    a name that lines computed before it: (lines, expression). Names made start with
    ``prefix`` (unique within the loop); the lines add to ``bad``."""
    lines: list[str] = []
    n = 0
    while True:
        # the innermost call first (its argument holds no other)
        found = None
        for m in _CALL.finditer(expr):
            end = _argument(expr, m.end())
            if not _CALL.search(expr, m.end(), end):
                found = (m, end)
                break
        if found is None:
            return lines, expr
        m, end = found
        u = f"{prefix}_{n}"
        n += 1
        lines.append(f"a{u} = F({expr[m.end():end]})")
        lines += _LINES[m.group(1)](f"a{u}", u)
        expr = f"{expr[:m.start()]}T(m{u}){expr[end + 1:]}"
