"""tf.jit's native code on disk: a compiled segment (flowgrad/jit_native.py) is saved once
and loaded by later processes instead of compiled again (W1's 360-kernel gradient: 1.1-1.3 s
to compile, 10-20 ms to load; numba's import, 0.15-0.3 s, either way).

An entry is one file, ``<folder>/<sha256 of its key>.nbx``. Its key is the text of what the
machine code depends on: the segment's source and signature (dtype, scalars or arrays,
serial or parallel), numba's options, the versions of flowgrad, numba, llvmlite and Python,
and the CPU (a tag read without numba, for the file name; numba's own target triple, CPU
name and features are checked on load, so code built for another machine never runs). The
folder: ``FLOWGRAD_JIT_CACHE`` where set (``0`` or empty: no cache), else a per-user cache
folder (``$XDG_CACHE_HOME/flowgrad/jit``, ``~/.cache/flowgrad/jit``; the platform's
elsewhere).

The file holds numba's own compile result (``CompileResult._reduce``: object code and what
rebuilding the function takes), behind a header with the full key, numba's target and the
SHA-256 of that payload. The entry is handed to numba as the dispatcher's cache, so numba
loads it, or compiles and saves, as it does its own ``cache=True`` files.

NOTE: robustness. A write goes to a temporary file renamed over the entry (``os.replace``):
two processes compiling one program at once each write a whole file, and a reader sees one
whole file or the other (the same code). An entry is loaded only when its header's key,
numba version, target and payload digest all match; anything else (truncated, garbled, from
another version or CPU, unreadable, or numba failing to rebuild it) is a miss: compiled
again and overwritten, never run, never raised. A folder that cannot be written warns once
per process and is not written again (entries in it are still read: a read-only folder
filled elsewhere works). Each segment function is named after its key's digest, so symbols
of code loaded from different processes never collide in numba's JIT. Entries used least
recently are removed beyond MAX_BYTES. An entry is a pickle of machine code, trusted as
Python's own ``__pycache__`` is: a folder made here is its user's alone; a shared one
(``FLOWGRAD_JIT_CACHE``) must be writable only by users trusted to run code.

This module imports nothing of flowgrad's; numba is imported by its caller.
"""
from __future__ import annotations

import hashlib
import importlib.util
import json
import math
import os
import pickle
import platform
import re
import struct
import sys
import time

import numpy as np

ENV = "FLOWGRAD_JIT_CACHE"
FORMAT = 1                      # the layout of an entry and of its key: bump on change
MAGIC = b"flowgrad-jit-native\n"
SUFFIX = ".nbx"
MAX_BYTES = 256 << 20           # the folder's size beyond which old entries are removed
PRUNE_EVERY = 32                # saves between two looks at the folder's size

# numba's options for every segment (part of the key)
OPTIONS = {"cache": False, "fastmath": False, "error_model": "numpy", "nogil": False}

# What this process did: segments numba compiled, entries loaded instead, entries saved, and
# entries found but refused (corrupt, stale, another CPU). Tests read them.
counts = {"compiled": 0, "loaded": 0, "saved": 0, "refused": 0}

_memo: dict = {}
_unwritable: set = set()        # folders a write failed in (warned once)


def folder() -> str | None:
    """The cache folder, or None when the cache is off (``FLOWGRAD_JIT_CACHE=0`` or empty).
    Read at every use, so a change of the variable takes effect at the next compile."""
    value = os.environ.get(ENV)
    if value is not None:
        value = value.strip()
        return None if value in ("", "0") else os.path.abspath(os.path.expanduser(value))
    if sys.platform == "win32":
        base = os.environ.get("LOCALAPPDATA") or os.path.expanduser("~\\AppData\\Local")
    elif sys.platform == "darwin":
        base = os.path.expanduser("~/Library/Caches")
    else:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    return os.path.join(base, "flowgrad", "jit")


_HERE = os.path.dirname(os.path.abspath(__file__))


def _package_tag(package, version_file):
    """A package's version as its installed files say, without importing it: the digest of
    its generated version file (versioneer's: the version and the revision)."""
    try:
        spec = importlib.util.find_spec(package)
        where = spec.submodule_search_locations[0]
        with open(os.path.join(where, version_file), "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()[:16]
    except Exception:           # (checked again on load: numba.__version__ is in the header)
        return "unknown"


def _flowgrad_tag():
    """flowgrad's version and a digest of the code that writes and calls the segments
    (a source tree between releases changes it without changing the version)."""
    h = hashlib.sha256()
    version = "unknown"
    try:
        with open(os.path.join(_HERE, "__init__.py"), encoding="utf-8") as f:
            found = re.search(r"^__version__ = ['\"]([^'\"]+)", f.read(), re.M)
        version = found.group(1) if found else version
        for name in ("jit_native.py", "jit_native_cache.py"):
            with open(os.path.join(_HERE, name), "rb") as f:
                h.update(f.read())
    except OSError:
        pass
    return f"{version}+{h.hexdigest()[:12]}"


def versions() -> dict:
    """The versions in every key (read once, without importing numba: a few files, 0.5 ms).
    Tests change ``versions()["flowgrad"]`` to stand for another release."""
    if "versions" not in _memo:
        _memo["versions"] = {"format": str(FORMAT), "flowgrad": _flowgrad_tag(),
                             "numba": _package_tag("numba", "_version.py"),
                             "llvmlite": _package_tag("llvmlite", "_version.py"),
                             "python": sys.version.split()[0],
                             "implementation": sys.implementation.cache_tag or "?"}
    return _memo["versions"]


def cpu_tag() -> str:
    """This machine's CPU as the file name sees it, read without numba: the model and
    feature flags (Linux: /proc/cpuinfo), and numba's settings that change the target."""
    if "cpu" not in _memo:
        parts = [platform.machine()]
        try:
            if not sys.platform.startswith("linux"):
                parts.append(platform.processor())  # (on Linux it may start `uname -p`)
            with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
                for line in f:
                    if not line.strip():
                        break           # (the first processor)
                    k = line.split(":")[0].strip()
                    if k in ("vendor_id", "model name", "cpu family", "model", "flags",
                             "Features", "CPU implementer", "CPU part"):
                        parts.append(line.strip())
        except OSError:
            pass
        parts += [f"{k}={v}" for k, v in sorted(os.environ.items())
                  if k.startswith("NUMBA_CPU") or k == "NUMBA_OPT"]
        _memo["cpu"] = "\n".join(parts)
    return _memo["cpu"]


def key(source: str, signature: str, parallel: bool) -> str:
    """The key of a segment: everything its machine code depends on, as text."""
    v = versions()
    head = [f"{k} {v[k]}" for k in sorted(v)]
    head += [f"signature {signature}", f"parallel {bool(parallel)}",
             f"options {sorted(OPTIONS.items())}", f"cpu {cpu_tag()}"]
    return "\n".join(head) + "\n\n" + source


def digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def path_of(k: str, where: str | None = None) -> str | None:
    """The entry file of key ``k`` (None when the cache is off)."""
    where = folder() if where is None else where
    return None if where is None else os.path.join(where, digest(k)[:40] + SUFFIX)


# NOTE: loading rebuilds numba's compile result through its internals (the dispatcher's
# cache hook, CompileResult._rebuild, the runtime's initialisation), which change between
# numba releases; a mismatch there can crash rather than raise. So the cache is used only
# with the numba releases it was checked with (tests/test_jit_native_cache.py); with any
# other, segments are compiled, as without a cache folder.
TESTED_NUMBA = ("0.68",)


def supported(numba) -> bool:
    """Whether this numba release is one the cache was checked with (TESTED_NUMBA)."""
    return ".".join(numba.__version__.split(".")[:2]) in TESTED_NUMBA


def cached(k: str) -> bool:
    """True when an entry for key ``k`` is on disk (not checked: the cost model's guess)."""
    p = path_of(k)
    return p is not None and os.path.isfile(p)


def build(numba, source: str, dtype, signature, sig_text: str, parallel: bool, warn=None):
    """The numba dispatcher of a segment's source (a function ``seg``) for ``signature``
    (numba types), loaded from the cache folder when an entry matches, else compiled (and
    saved). ``warn(message)`` is told, once per process, that the folder cannot be
    written."""
    k = key(source, sig_text, parallel)
    name = "seg_" + digest(k)[:24]      # (symbols unique to this entry: see the NOTE above)
    ns = {"__name__": __name__, "math": math, "np": np, "T": dtype.type, "U": np.uint64,
          "F": np.float64, "prange": numba.prange}
    exec(compile(source.replace("def seg(", f"def {name}(", 1), f"<flowgrad.jit_native {name}>",
                 "exec"), ns)
    fn = numba.njit(parallel=parallel, **OPTIONS)(ns[name])
    where = folder() if supported(numba) else None
    entry = None
    if where is not None:
        entry = Entry(numba, where, k, tuple(signature), warn)
        # NOTE: numba's hook for a dispatcher's cache (what cache=True sets): compile(sig)
        # asks it for the compile result first and hands it what it compiled
        fn._cache = entry
    fn.compile(tuple(signature))
    counts["loaded" if entry is not None and entry.loaded else "compiled"] += 1
    return fn


class Entry:
    """One segment's entry, as numba's dispatcher cache (load_overload / save_overload):
    the signature compiled at build only; others (arrays of another layout, compiled by
    numba on first use) are neither loaded nor saved."""

    def __init__(self, numba, where, k, sig, warn):
        self.numba, self.folder, self.key, self.sig, self.warn = numba, where, k, sig, warn
        self.path = path_of(k, where)
        self.loaded = False

    @property
    def cache_path(self):
        return self.folder

    def enable(self):
        pass

    def disable(self):
        pass

    def flush(self):
        pass

    def load_overload(self, sig, target_context):
        if tuple(sig) != self.sig:
            return None
        try:
            with open(self.path, "rb") as f:
                data = f.read()
        except OSError:
            return None         # (none yet: the common miss)
        try:
            cres = self._rebuild(data, target_context)
        except Exception:       # (a bad entry, or numba refusing it: compiled again)
            cres = None
        if cres is None:
            counts["refused"] += 1
            return None
        self.loaded = True
        try:
            os.utime(self.path)         # (recently used: pruned last)
        except OSError:
            pass
        return cres

    def _rebuild(self, data, target_context):
        if not data.startswith(MAGIC):
            return None
        at = len(MAGIC)
        (n,) = struct.unpack_from("<I", data, at)
        head = json.loads(data[at + 4:at + 4 + n].decode("utf-8"))
        payload = data[at + 4 + n:]
        if head.get("key") != self.key or head.get("numba") != self.numba.__version__ or \
                head.get("target") != _target(target_context) or \
                head.get("sha256") != hashlib.sha256(payload).hexdigest():
            return None
        from numba.core.compiler import CompileResult
        from numba.core.runtime import rtsys
        # NOTE: numba's own cache calls target_context.refresh() here, which loads every
        # lowering registry (scipy.linalg included: 0.25-0.5 s) for its first step only, the
        # runtime (NRT: arrays cross into compiled code through it): that step alone
        rtsys.initialize(target_context)
        parts = pickle.loads(payload)
        if _defined(target_context, parts[0]):
            return None         # (its symbols are in the JIT already: compile afresh)
        return CompileResult._rebuild(target_context, *parts)

    def save_overload(self, sig, cres):
        if tuple(sig) != self.sig or self.folder in _unwritable:
            return
        try:
            if any(not x.can_cache for x in cres.lifted) or cres.library.has_dynamic_globals:
                return
            from numba.core.serialize import dumps
            # (without numba's annotated listing of the source: 35 ms and 100 KB for W1's
            # gradient, read by inspect_types() alone)
            payload = dumps(cres._replace(type_annotation="")._reduce())
            head = json.dumps({"key": self.key, "numba": self.numba.__version__,
                               "target": _target(cres.target_context),
                               "sha256": hashlib.sha256(payload).hexdigest()}).encode()
            blob = MAGIC + struct.pack("<I", len(head)) + head + payload
        except Exception:       # (numba could not serialise it: not cached)
            return
        tmp = f"{self.path}.{os.getpid()}.{os.urandom(6).hex()}.tmp"
        try:
            os.makedirs(self.folder, mode=0o700, exist_ok=True)   # (the user's alone)
            with open(tmp, "wb") as f:
                f.write(blob)
            os.replace(tmp, self.path)
        except OSError as e:
            _unwritable.add(self.folder)
            try:
                os.unlink(tmp)
            except OSError:
                pass
            if self.warn is not None:
                self.warn(f"tf.jit: cannot write compiled code to the cache folder "
                          f"{self.folder} ({type(e).__name__}: {e.strerror or e}); "
                          f"compiling without saving (set {ENV} to a writable folder, or "
                          f"to 0 to turn the cache off)")
            return
        counts["saved"] += 1
        if counts["saved"] % PRUNE_EVERY == 1:
            prune(self.folder)


def costs_path() -> str | None:
    """The file of the cost model's measurements on this machine (native_costs.numpy_ns), in
    the cache folder: one per CPU, NumPy and Python, so that every process on a machine
    plans a program alike (and finds its segments in the cache); None when the cache is
    off."""
    where = folder()
    if where is None:
        return None
    tag = digest(f"{FORMAT} {cpu_tag()} numpy {np.__version__} {platform.python_version()}")
    return os.path.join(where, f"costs-{tag[:16]}.json")


def load_costs() -> dict:
    """The measurements saved on this machine ({"exp <f4": ns...}), or {} (none yet,
    unreadable or garbled: measured again)."""
    path = costs_path()
    if path is None:
        return {}
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {k: float(v) for k, v in data.items() if isinstance(k, str) and
            type(v) in (int, float) and math.isfinite(v) and v > 0}


def save_costs(costs: dict) -> None:
    """Write the measurements (whole, by rename: a reader sees the old file or the new);
    nothing when the folder cannot be written (the compiled code's writes warn of it)."""
    path = costs_path()
    if path is None or os.path.dirname(path) in _unwritable:
        return
    tmp = f"{path}.{os.getpid()}.{os.urandom(6).hex()}.tmp"
    try:
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(costs, f, sort_keys=True)
        os.replace(tmp, path)
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass


def _target(target_context):
    return repr(target_context.codegen().magic_tuple())


def _defined(target_context, libdata):
    """True when a parallel loop of the entry (a parfor gufunc: numba names it after the
    address of an object in the process that compiled it) has a name numba's JIT defines
    already: linked, a call could go to the other one. (Other shared names are numba's
    helpers, the same everywhere, or this entry's own, unique to its key.)"""
    import llvmlite.binding as ll
    if libdata[1] != "object":
        return True
    engine = target_context.codegen()._engine
    shared = ll.parse_bitcode(libdata[2][1])
    return any(not f.is_declaration and "__numba_parfor_gufunc" in f.name and
               engine.is_symbol_defined(f.name) for f in shared.functions)


def prune(where: str, limit: int = MAX_BYTES) -> int:
    """Remove the entries used least recently until the folder holds ``limit`` bytes or
    fewer (and stale temporary files); returns how many it removed."""
    try:
        names = os.listdir(where)
    except OSError:
        return 0
    entries, total, removed = [], 0, 0
    for n in names:
        p = os.path.join(where, n)
        try:
            st = os.stat(p)
        except OSError:
            continue
        if n.endswith(".tmp"):
            if st.st_mtime < time.time() - 3600:     # (a writer killed mid-write, long ago)
                removed += _remove(p)
            continue
        if n.endswith(SUFFIX):
            entries.append((st.st_mtime, st.st_size, p))
            total += st.st_size
    for _, size, p in sorted(entries):
        if total <= limit:
            break
        removed += _remove(p)
        total -= size
    return removed


def _remove(p):
    try:
        os.unlink(p)
        return 1
    except OSError:
        return 0
