"""Tensor printing in exactly TF.js's format (``tensor.toString()`` / ``tf.print``).

Scalars print like JS ``Number.prototype.toString`` of the value (a float32 widened to a
double: ``0.3333333432674408``); elements of rank >= 1 print like
``parseFloat(v.toFixed(7)).toString()``; columns are padded to their widest entry; more
than 20 entries along an axis show the first 3, ``...`` and the last 3. Strings are
single-quoted (``['a', 'bc']``), except a scalar string, which prints as it is.

>>> import flowgrad as tf
>>> tf.tensor([["a", "bc"], ["def", "g"]]).print()
Tensor
    [['a'  , 'bc'],
     ['def', 'g' ]]
"""
import math
from decimal import Decimal

LIMIT = 20       # more values than this along an axis are elided
EDGE = 3         # how many are shown at each end


def js_number(v):
    """``String(v)`` in JavaScript for a float: shortest round-trip digits, JS exponents.

    >>> js_number(12.0), js_number(1e-7), js_number(0.1), js_number(1e21)
    ('12', '1e-7', '0.1', '1e+21')
    """
    if v != v:
        return "NaN"
    if v == math.inf:
        return "Infinity"
    if v == -math.inf:
        return "-Infinity"
    if v == 0:
        return "0"
    sign = "-" if v < 0 else ""
    _, digits, exp = Decimal(repr(abs(float(v)))).as_tuple()
    ds = "".join(map(str, digits))
    stripped = ds.rstrip("0")
    exp += len(ds) - len(stripped)
    ds = stripped.lstrip("0") or "0"
    k = len(ds)
    n = exp + k                     # value = 0.ds x 10^n
    if k <= n <= 21:
        body = ds + "0" * (n - k)
    elif 0 < n <= 21:
        body = ds[:n] + "." + ds[n:]
    elif -6 < n <= 0:
        body = "0." + "0" * (-n) + ds
    else:
        e = n - 1
        mant = ds if k == 1 else ds[0] + "." + ds[1:]
        body = f"{mant}e{'+' if e >= 0 else '-'}{abs(e)}"
    return sign + body


def js_fixed7(v):
    """``parseFloat(v.toFixed(7)).toString()`` in JavaScript.

    >>> js_fixed7(1/3), js_fixed7(-1e-8), js_fixed7(0.00390625)
    ('0.3333333', '0', '0.0039063')
    """
    v = float(v)
    if v != v or v in (math.inf, -math.inf) or abs(v) >= 1e21:
        return js_number(v)
    s = format(v, ".7f")
    # Python rounds exact ties to even; toFixed rounds the magnitude up. Ties are exact
    # binary fractions (like 1/256), found with integer arithmetic.
    p, q = v.as_integer_ratio()
    twice = abs(p) * 20_000_000
    if twice % q == 0 and (twice // q) % 2 == 1:
        m = (twice // q + 1) // 2            # magnitude x 1e7, rounded up
        s = ("-" if p < 0 else "") + f"{m // 10**7}.{m % 10**7:07d}"
    return js_number(float(s))


def _val(v, dtype):
    if dtype == "bool":
        return "true" if v else "false"
    if dtype == "int32":
        return str(int(v))
    if dtype == "string":
        return f"'{v}'"             # TF.js quotes the elements of rank >= 1 ...
    return js_fixed7(v)


def _scalar(v, dtype):
    if dtype == "bool":
        return "true" if v else "false"
    if dtype == "int32":
        return str(int(v))
    if dtype == "string":
        return v                    # ... but prints a scalar string as it is
    return js_number(float(v))


def _pad_per_col(vals, shape, dtype):
    if len(shape) <= 1 or not vals:
        return []
    ncol = shape[-1]
    pad = [0] * ncol
    if ncol == 0:
        return pad
    for i, v in enumerate(vals):
        j = i % ncol
        w = len(_val(v, dtype))
        if w > pad[j]:
            pad[j] = w
    return pad


def _fmt(v, pad, dtype):
    s = _val(v, dtype)
    return s + " " * (pad - len(s)) if pad else s


def _sub(vals, shape, dtype, pad, is_last=True):
    rank = len(shape)
    if rank == 0:
        return [_scalar(vals[0], dtype)]
    size = shape[0]
    if rank == 1:
        p = (lambda i: pad[i] if i < len(pad) else 0)
        if size > LIMIT:
            first = [_fmt(vals[i], p(i), dtype) for i in range(EDGE)]
            last = [_fmt(vals[i], p(i), dtype) for i in range(size - EDGE, size)]
            return ["[" + ", ".join(first) + ", ..., " + ", ".join(last) + "]"]
        return ["[" + ", ".join(_fmt(vals[i], p(i), dtype) for i in range(size)) + "]"]
    sub = shape[1:]
    stride = 1
    for s in sub:
        stride *= s
    lines = []
    rows = (list(range(EDGE)) + [None] + list(range(size - EDGE, size))
            if size > LIMIT else list(range(size)))
    for i in rows:
        if i is None:
            lines.append("...")
            continue
        lines.extend(_sub(vals[i * stride:(i + 1) * stride], sub, dtype, pad,
                          i == size - 1))
    sep = "," if rank == 2 else ""
    if not lines:
        lines = ["["]
    else:
        lines[0] = "[" + lines[0] + sep
    for i in range(1, len(lines) - 1):
        lines[i] = " " + lines[i] + sep
    newline_sep = ",\n" + "\n" * (rank - 2)
    lines[-1] = (" " + lines[-1] + "]" + ("" if is_last else newline_sep))
    return lines


def tensor_to_string(values, shape, dtype, verbose=False):
    """The TF.js string of a tensor given its values (a NumPy array), shape and dtype."""
    vals = values.reshape(-1).tolist()
    shape = tuple(shape)
    pad = _pad_per_col(vals, shape, dtype)
    lines = ["Tensor"]
    if verbose:
        lines.append(f"  dtype: {dtype}")
        lines.append(f"  rank: {len(shape)}")
        lines.append(f"  shape: [{','.join(str(s) for s in shape)}]")
        lines.append("  values:")
    lines.append("\n".join("    " + line for line in _sub(vals, shape, dtype, pad)))
    return "\n".join(lines)
