"""A seeded fuzz test of the whole public API: every parameter of every public callable
(tests/fuzz_cases.py finds them: the op table, ``tf.*``, ``tf.losses`` / ``image`` /
``linalg``, ``tf.train``, ``tf.debug``, the methods of their classes) gets bad arguments —
numbers, NaN and inf, huge ints, strings, None, objects, object arrays, scalar, empty and
wrong-rank tensors, disposed tensors, functions — one argument at a time, the others valid.
The slots come from each callable's own signature, so a new parameter is fuzzed the day it
lands. The only acceptable outcomes are a result or a FlowgradError whose message names the
function or the argument; a bare Python or NumPy exception, a silently truncated int
argument or a disposed tensor passing through is a failure. The default run tries a few
values of every family in every slot; ``-m slow`` tries them all, and pairs."""
import contextlib
import fnmatch
import inspect
import io
import os
import random
import time
import warnings

import numpy as np
import pytest

import flowgrad as tf
from flowgrad.errors import FlowgradError

from fuzz_cases import (CASES, FUZZ_DIR, NO_CASE, Fresh, has_parameters, op_case,
                        public_api, release)


# ---------------------------------------------------------------- the bad values
def _disposed():
    t = tf.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    t.dispose()
    return t


def _objects(*items):
    a = np.empty(len(items), dtype=object)
    a[:] = list(items)
    return a


NAN, INF = float("nan"), float("inf")
# family -> {name: value}; a Fresh value is made anew for each call (tensors, which a call
# could dispose, and what they hold)
FAMILIES = {
    "number": {"float 1.7": 1.7, "-1": -1, "0": 0, "2**40": 2 ** 40, "-2**40": -2 ** 40,
               "1e12": 1e12, "True": True, "np.float64(1.5)": np.float64(1.5),
               "np.int64(2**40)": np.int64(2 ** 40), "np.bool_": np.bool_(True), "1j": 1j},
    "nonfinite": {"nan": NAN, "inf": INF, "-inf": -INF, "[nan]": [NAN],
                  "np.float64(nan)": np.float64(NAN)},
    "huge": {"2**70": 2 ** 70, "-2**70": -2 ** 70, "[2**70, 1]": [2 ** 70, 1],
             "10**400": 10 ** 400, "[2**40, 2**40]": [2 ** 40, 2 ** 40]},
    "string": {"str": "abc", "''": "", "ndarray str": np.array(["a"])},
    "none": {"None": None},
    "object": {"object": object(), "{}": {}, "[]": [], "[1.5, 'a']": [1.5, "a"],
               "ragged": [[1], [2, 3]], "set": {1, 2}, "[None]": [None]},
    "object array": {"ndarray objects": _objects(1, "a", None),
                     "ndarray of tensors": Fresh(lambda: _objects(tf.scalar(1.0),
                                                                  tf.tensor([1.0, 2.0]))),
                     "ndarray object empty": np.empty(0, dtype=object)},
    "array": {"ndarray[1,0]": np.array([1, 0]), "ndarray 0-d": np.array(2.5),
              "ndarray empty": np.array([])},
    "tensor": {"scalar 1.7": Fresh(lambda: tf.scalar(1.7)),
               "scalar nan": Fresh(lambda: tf.scalar(NAN)),
               "scalar int 1": Fresh(lambda: tf.scalar(1, "int32")),
               "bool tensor": Fresh(lambda: tf.tensor([[True, False], [False, True]])),
               "empty tensor": Fresh(lambda: tf.tensor([])),
               "empty 0x3": Fresh(lambda: tf.zeros([0, 3])),
               "rank 3": Fresh(lambda: tf.zeros([2, 2, 2])),
               "rank 5": Fresh(lambda: tf.ones([1, 2, 1, 2, 1])),
               "inf tensor": Fresh(lambda: tf.tensor([INF, NAN])),
               "disposed": Fresh(_disposed)},
    "function": {"lambda a, b, c: a": lambda a, b, c: a, "lambda: None": lambda: None,
                 "lambda *a: 'abc'": lambda *a: "abc", "builtin len": len},
}
BAD = {name: value for values in FAMILIES.values() for name, value in values.items()}
PER_FAMILY = 3          # values of each family tried in each slot by the default run

# arguments that must be whole numbers: a non-integral value may not pass silently
INT_ARGS = {"axis", "perm", "dim", "size", "shape", "k", "depth", "num", "num_rows",
            "num_columns", "block_size", "block_shape", "num_segments", "reps", "begin",
            "strides", "filter_size", "dilations", "dilation", "stride", "num_lower",
            "num_upper", "batch_dims", "output_shape", "window_shape", "num_or_size_splits",
            "argnums", "max_traces", "threads", "top_k",
            "checkpoint_number", "max_to_keep", "n", "bins", "baseline_steps", "patience"}
NON_INTEGRAL = {"float 1.7", "nan", "inf", "-inf", "np.float64(1.5)", "scalar 1.7",
                "scalar nan", "[nan]", "[1.5, 'a']", "np.float64(nan)"}
# lookups by key: a missing key is their protocol's KeyError / IndexError (``in``, iteration)
LOOKUPS = {"Graph.node", "Explanation.__getitem__"}
# findings in files whose owners are changing them, so not fixed from here: (target,
# argument, bad value) globs and the start of the outcome -> where the fix goes. They are
# left out of the failures; an entry whose calls no longer fail is stale (a test says so).
KNOWN = {}   # (target, argument, bad value, outcome) -> why: findings left for later
# functions that never read the values of their tensor arguments (or take a disposed one
# on purpose: the monitor records a disposed loss as NaN, a tape may watch any tensor)
_NO_READ = {"zeros_like", "ones_like", "tf.tidy", "tf.variable_grads", "tf.keep",
            "tf.dispose", "GradientTape.watch", "GradientMonitor.on_apply",
            "GradientMonitor.record"}


# ---------------------------------------------------------------- the targets
class Owned:
    """What one call made: fresh arguments (disposed after it, tensors too) and results
    (their variables, optimizers, hooks and monitors released; tensors go with the tidy)."""

    def __init__(self):
        self.fresh, self.results = [], []

    def release(self):
        release(self.results)
        release(self.fresh, tensors=True)


class Target:
    """One public callable to fuzz: ``fn`` gives the signature (the slots), ``case`` the
    valid call; ``parent`` (for the function a call returns: ``tf.grad(f)``) makes it."""

    def __init__(self, name, fn, case, parent=None):
        self.name, self.fn, self.case, self.parent = name, fn, case, parent
        short = name.split(".")[-1].split("(")[0]
        owner = name.split(".")[0] if "." in name and not name.startswith("tf.") else ""
        self.names = tuple(n for n in (short, owner.lstrip("_")) if n)

    def build(self, owned):
        """(function, args, kwargs): made anew; what to dispose after goes in owned."""
        if self.parent is None:
            a, k, own = self.case.build()
            owned.fresh.extend(own)
            return self.fn, a, k
        pfn, pa, pk = self.parent.build(owned)
        result = pfn(*pa, **pk)
        owned.results.append(result)
        pick = self.parent.case.pick
        a, k, own = self.case.build()
        owned.fresh.extend(own)
        return (pick(result) if pick else result), a, k

    def finish(self, result, owned):
        """Call what the call returned, as its valid use would (tf.grad(f) -> grad_f(x))."""
        owned.results.append(result)
        if self.case.level2 is not None:
            a, k, own = self.case.level2.build()
            owned.fresh.extend(own)
            fn = self.case.pick(result) if self.case.pick else result
            owned.results.append(fn(*a, **k))

    def undo(self):
        for t in (self, self.parent):
            if t is not None and t.case.undo is not None:
                t.case.undo()


def _level2(t):
    """The target of the function t's valid call returns, with that function's signature."""
    owned, fns = Owned(), []

    def run():
        fn, a, k = t.build(owned)
        r = fn(*a, **k)
        owned.results.append(r)
        fns.append(t.case.pick(r) if t.case.pick else r)
    try:
        tf.tidy(run)
    finally:
        owned.release()
        t.undo()
    return Target(f"{t.name}(…)", fns[0], t.case.level2, parent=t)


def targets(slow=False):
    """Every fuzzed callable (a Target), in a fixed order; those whose case is marked slow
    only when ``slow``."""
    out = []
    for name, fn in public_api().items():
        if _is_op(name):
            out.append(Target(name, fn, op_case(name, fn)))
            continue
        case = CASES.get(name)
        if case is None or (case.is_slow and not slow):
            continue
        t = Target(name, fn, case)
        out.append(t)
        if case.level2 is not None:
            out.append(_level2(t))
    return out


def _is_op(name):
    """The op table's and the namespaces' functions are named without a dot."""
    return "." not in name


def params(fn, args, kw):
    """The argument slots of a call, from fn's signature: the positions given (a ``*args``
    position is named ``args[i]``), then every keyword parameter (those with defaults,
    those given, and a ``**kwargs`` key given)."""
    try:
        sig = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        sig = {}
    ps = list(sig.values())
    positional = [p.name for p in ps if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    star = next((p.name for p in ps if p.kind is p.VAR_POSITIONAL), "arg")
    slots = []
    for i in range(len(args)):
        name = positional[i] if i < len(positional) else f"{star}[{i - len(positional)}]"
        if name not in ("self", "cls"):
            slots.append((i, name))
    given = set(positional[:len(args)])
    for p in ps:
        if (p.name in given or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD, p.POSITIONAL_ONLY)
                or p.name in ("self", "cls")):
            continue
        if p.default is not p.empty or p.name in kw:
            slots.append((p.name, p.name))
    slots += [(k, k) for k in kw if k not in sig]
    return slots


# ---------------------------------------------------------------- one call
def _camel(name):
    head, *rest = name.split("_")
    return head + "".join(w.title() for w in rest)


def _useful(msg, names, arg):
    """The message names the function (snake_case, camelCase or a TF.js spelling; for a
    method, it or its class), the argument, or says what was expected."""
    low = msg.lower()
    words = [arg, "argument '", "must ", "tensor is disposed", "expected", "()"]
    for name in names:
        words += [name, _camel(name), name.replace("_", "")]
    parts = any(all(p in low for p in n.lower().split("_")) for n in names)  # "Gram-Schmidt"
    return len(msg) > 15 and (parts or any(w.lower() in low for w in words if w))


def _value(v, owned):
    if isinstance(v, Fresh):
        v = v.make()
        owned.fresh.append(v)
    return v


def call_one(t, subs):
    """One call of target t with the bad values ``subs`` [(slot, arg, bad name)] in place
    of the valid arguments: None when the outcome is acceptable, else why not."""
    owned, based = Owned(), []

    def run():
        fn, a, k = t.build(owned)
        for slot, arg, bad in subs:
            value = _value(BAD[bad], owned)
            if isinstance(slot, int):
                based.append(a[slot])
                a[slot] = value
            else:
                based.append(k.get(slot))
                k[slot] = value
        t.finish(fn(*a, **k), owned)
    try:
        try:
            tf.tidy(run)
        finally:
            owned.release()
            t.undo()
    except (KeyError, IndexError) as e:
        if t.name in LOOKUPS or t.name.endswith(".__getitem__"):
            return None
        return f"bare {type(e).__name__}: {str(e)[:160]}"
    except FlowgradError as e:
        if not any(_useful(str(e), t.names, arg) for _, arg, _ in subs):
            return f"{type(e).__name__} without the function or argument: {e}"
        return None
    except Exception as e:          # noqa: BLE001 - any other exception is the finding
        return f"bare {type(e).__name__}: {str(e)[:160]}"
    for (_, arg, bad), base in zip(subs, based):
        if bad == "disposed" and isinstance(base, tf.Tensor) and t.name not in _NO_READ:
            return "a disposed tensor passed silently"
        if bad in NON_INTEGRAL and arg in INT_ARGS:
            return "a non-integral value was accepted (silently truncated?)"
    return None


def chosen(slot_number, everything):
    """The bad values tried in one slot: all of them, or ``PER_FAMILY`` of each family,
    turning with the slot's number so that across slots every value is tried."""
    if everything:
        return sorted(BAD)
    out = []
    for values in FAMILIES.values():
        names = list(values)
        for j in range(min(PER_FAMILY, len(names))):
            out.append(names[(slot_number * PER_FAMILY + j) % len(names)])
    return out


@contextlib.contextmanager
def _in_tmp():
    """Run in the fuzz's own folder (a path argument "abc" may be written), printing
    nowhere (tf.print prints what it accepts), without warnings (NaN in, NaN out)."""
    here = os.getcwd()
    os.chdir(FUZZ_DIR)
    try:
        with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        os.chdir(here)


def fuzz(everything=False, pairs=0, seed=14, only=None, slow=None, tried=None):
    """Bad values in every argument slot of every target, one at a time (``PER_FAMILY`` of
    each family, or ``everything``), then ``pairs`` seeded calls with bad values in two
    slots at once. ``only``: a set of (target name, argument) to restrict to; ``slow``
    (default: ``everything``) adds the targets marked slow; ``tried``: a set that gets the
    key of every call. Returns (number of calls, {key: reason})."""
    tried = set() if tried is None else tried
    rng = random.Random(seed)
    failures, calls, multi, slot_number = {}, 0, [], 0
    with _in_tmp():
        for t in targets(everything if slow is None else slow):
            slots = params(t.fn, *_sample_args(t))
            if only is not None:
                slots = [s for s in slots if (t.name, s[1]) in only]
            for slot, arg in slots:
                slot_number += 1
                for bad in chosen(slot_number, everything):
                    calls += 1
                    tried.add((t.name, arg, bad))
                    why = call_one(t, [(slot, arg, bad)])
                    if why:
                        failures[(t.name, arg, bad)] = why
            if len(slots) > 1:
                multi.append((t, slots))
        names = sorted(BAD)
        for _ in range(pairs if multi else 0):
            t, slots = rng.choice(multi)
            (s1, a1), (s2, a2) = rng.sample(slots, 2)
            b1, b2 = rng.choice(names), rng.choice(names)
            calls += 1
            tried.add((t.name, f"{a1}+{a2}", f"{b1}+{b2}"))
            why = call_one(t, [(s1, a1, b1), (s2, a2, b2)])
            if why:
                failures[(t.name, f"{a1}+{a2}", f"{b1}+{b2}")] = why
    return calls, failures


def _sample_args(t):
    """The valid arguments of t (built once and released: only their count and keys)."""
    a, k, owned = t.case.build()
    release(owned, tensors=True)
    return a, k


def known(key, why=None):
    """The KNOWN entry a call (target, argument, bad value; "a+b" for pairs) matches, or
    None; ``why``: its outcome must start as the entry says."""
    name, args, bads = key
    for entry in KNOWN:
        n, a, b, start = entry
        if fnmatch.fnmatchcase(name, n) and (why is None or why.startswith(start)) and any(
                fnmatch.fnmatchcase(arg, a) and fnmatch.fnmatchcase(bad, b)
                for arg, bad in zip(args.split("+"), bads.split("+"))):
            return entry
    return None


def split_known(failures):
    """(new failures, {KNOWN entry: [its failures]})."""
    new, seen = {}, {}
    for key, why in failures.items():
        k = known(key, why)
        if k is None:
            new[key] = why
        else:
            seen.setdefault(k, []).append(key)
    return new, seen


def _report(failures):
    return "\n".join(f"{n}({a}={b}): {why}" for (n, a, b), why in sorted(failures.items()))


# ---------------------------------------------------------------- the tests
def test_every_public_callable_has_a_valid_call():
    """A public callable with parameters is fuzzed: it has a valid call (CASES, or the op
    table's), or NO_CASE says why not. A new public function fails here until it has one."""
    api = public_api()
    missing = sorted(n for n, fn in api.items() if has_parameters(fn) and not _is_op(n)
                     and n not in CASES and n not in NO_CASE)
    assert not missing, f"public callables without a valid call in tests/fuzz_cases.py: " \
                        f"{missing}"
    stale = sorted(n for n in list(CASES) + list(NO_CASE) if n not in api)
    assert not stale, f"CASES/NO_CASE name callables that are not public (any more): {stale}"


def _base_failures(slow):
    """{target: error} of the valid calls that fail (the slow targets' only, if slow)."""
    bad = {}
    with _in_tmp():
        for t in targets(slow=slow):
            if slow and not (t.case.is_slow or t.parent is not None and t.parent.case.is_slow):
                continue
            owned = Owned()

            def run():
                fn, a, k = t.build(owned)
                t.finish(fn(*a, **k), owned)
            try:
                tf.tidy(run)
            except Exception as e:      # noqa: BLE001
                bad[t.name] = f"{type(e).__name__}: {e}"
            finally:
                owned.release()
                t.undo()
    return bad


def test_base_calls_succeed():
    """Every valid call is valid, so each fuzzed call differs from a good one in one place."""
    bad = _base_failures(slow=False)
    assert not bad, bad


@pytest.mark.slow
def test_slow_base_calls_succeed():
    """The valid calls of the targets fuzzed only under -m slow (files, plots)."""
    bad = _base_failures(slow=True)
    assert not bad, bad


def test_slots_come_from_the_signatures():
    """A parameter the valid call leaves out (a keyword with a default) is fuzzed too, and
    the methods' receivers are not: minimize's var_list, set_memory_policy's policy."""
    slots = {t.name: [a for _, a in params(t.fn, *_sample_args(t))] for t in targets()}
    assert slots["Optimizer.minimize"] == ["f", "return_cost", "var_list", "skip_nonfinite"]
    assert slots["one_hot"][:2] == ["indices", "depth"]
    assert slots["tf.set_memory_policy"] == ["policy"]
    assert slots["tf.grad(…)"] == ["x", "dy"]
    assert slots["Tensor.as2d"] == ["shape[0]", "shape[1]"]


def _check(calls, failures, tried):
    """No failure but the KNOWN ones, and no KNOWN entry that its calls no longer hit."""
    new, seen = split_known(failures)
    assert not new, f"{len(new)} of {calls} calls:\n" + _report(new)
    hit = {known(key) for key in tried}
    stale = [k for k in KNOWN if k in hit and k not in seen]
    assert not stale, f"KNOWN entries whose calls pass now (remove them): {stale}"


def test_the_issue_27_findings_are_fuzzed():
    """The four bare exceptions of issue 27 (minimize's var_list: a number, an object array,
    a scalar tensor; one_hot's indices 2**70) are in the fuzz now, with every bad value."""
    only = {("Optimizer.minimize", "var_list"), ("one_hot", "indices")}
    for bad in ("2**70", "ndarray of tensors", "scalar 1.7", "lambda: None", "object", "nan"):
        assert bad in BAD
    tried = set()
    calls, failures = fuzz(everything=True, only=only, tried=tried)
    assert calls == 2 * len(BAD) and {k[:2] for k in tried} == only
    assert not failures, _report(failures)


def test_fuzz_public_api():
    """Three values of every family in every argument of the whole API (about 23,000
    calls, a second): a result or a FlowgradError that names the function or the
    argument."""
    before = tf.memory()["num_tensors"]
    tried = set()
    calls, failures = fuzz(tried=tried)
    assert calls > 20000
    _check(calls, failures, tried)
    assert tf.memory()["num_tensors"] - before <= 2      # nothing leaks, errors included


@pytest.mark.slow
def test_fuzz_public_api_everything():
    """Every bad value in every argument, the slow targets (files, plots) included (about
    44,000 calls)."""
    tried = set()
    _check(*fuzz(everything=True, tried=tried), tried)


@pytest.mark.slow
def test_fuzz_public_api_pairs():
    """Bad values in two arguments at once, 100,000 seeded calls."""
    tried = set()
    _check(*fuzz(pairs=100_000, seed=2024, tried=tried), tried)


if __name__ == "__main__":       # python tests/test_fuzz.py [all] [PAIRS]: the full report
    import sys
    t0 = time.perf_counter()
    every = "all" in sys.argv[1:]
    n = [int(a) for a in sys.argv[1:] if a.isdigit()]
    calls, failures = fuzz(everything=every, pairs=n[0] if n else 0)
    new, seen = split_known(failures)
    print(_report(new))
    for entry, keys in seen.items():
        print(f"KNOWN {entry}: {len(keys)} calls — {KNOWN[entry]}")
    print(f"{calls} calls, {len(new)} failures ({len(failures) - len(new)} known), "
          f"{time.perf_counter() - t0:.1f} s")
