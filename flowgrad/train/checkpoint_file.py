"""The checkpoint file: the safetensors layout, streamed to and from the arrays themselves.

The layout is safetensors' (https://huggingface.co/docs/safetensors): 8 bytes, the length
``N`` of the header (little-endian); ``N`` bytes of JSON, ``{name: {"dtype": "F32", "shape":
[...], "data_offsets": [begin, end]}, ..., "__metadata__": {str: str}}``, padded with spaces
to a multiple of 8; then the tensors' bytes, little-endian and in C order, back to back. Any
safetensors reader opens these files (tests/test_checkpoint.py checks it with the package).

NOTE: flowgrad writes and reads the layout itself rather than through the safetensors
package's NumPy API: that API builds the whole file as one ``bytes`` object on save and
copies every tensor out of another on load, so a checkpoint needed twice the model's memory
at its peak and two extra passes over it. Here each tensor is written from its own array
and read into a fresh one (as ``np.save``/``np.load`` do), with nothing in between.

The checksum (format version 2) is the SHA-256 of the manifest and, tensor by tensor in name
order, of its name, dtype, shape and the SHA-256s of its bytes in 8 MiB chunks; the chunks
are hashed on several threads (hashlib releases the GIL). Version 1 files (one SHA-256 over
the bytes themselves) still verify.
"""
import hashlib
import itertools
import json
import os
import sys
import tempfile
import threading

import numpy as np

from ..errors import CheckpointError

# flowgrad dtype -> (safetensors code, little-endian NumPy dtype)
CODES = {"float32": ("F32", "<f4"), "float64": ("F64", "<f8"), "int32": ("I32", "<i4"),
         "bool": ("BOOL", "|b1")}
_BY_CODE = {code: np.dtype(le) for code, le in CODES.values()}
_CODE_OF = {np.dtype(le).str: code for code, le in CODES.values()}
_CHUNK = 8 << 20                # bytes per hashed chunk
_PARALLEL_FROM = 4 * _CHUNK     # below this, threads cost more than they save
_MAX_HEADER = 100 << 20         # a header claiming more is damage, not a checkpoint


def little_endian(a, dtype_name):
    """``a`` (host) as a C-contiguous little-endian array: itself on little-endian CPUs."""
    a = np.asarray(a, dtype=CODES[dtype_name][1])
    return a if a.flags.c_contiguous else a.copy(order="C")


def _bytes(a):
    return memoryview(a).cast("B") if a.size else memoryview(b"")


# ---------------------------------------------------------------- checksum

class _ChunkSums:
    """The SHA-256s of the 8 MiB chunks of ``views``, computed by ``helpers`` threads
    started now and by the caller of ``wait()``; the chunks are taken from a shared
    ``itertools.count`` (atomic under the GIL: no lock).

    NOTE: the threads are this call's own (no pool shared between calls): a Ctrl-C while
    the caller hashes or waits leaves nothing locked; the helpers finish and end."""

    def __init__(self, views, helpers):
        self.chunks = [v[i:i + _CHUNK] for v in views for i in range(0, len(v), _CHUNK)]
        self.out = [None] * len(self.chunks)
        self.next = itertools.count()
        if sum(len(v) for v in views) < _PARALLEL_FROM:
            helpers = 0
        self.threads = [threading.Thread(target=self._work, name="flowgrad-checksum",
                                         daemon=True) for _ in range(helpers)]
        for t in self.threads:
            t.start()

    def _work(self):
        chunks, out = self.chunks, self.out
        for i in self.next:
            if i >= len(chunks):
                return
            out[i] = hashlib.sha256(chunks[i]).digest()

    def wait(self):
        self._work()
        for t in self.threads:
            t.join()
        if None in self.out:            # (a helper died: never a partial checksum)
            raise CheckpointError("checkpoint: computing the checksum failed")
        return self.out


def _cores():
    return min(4, os.cpu_count() or 1)


def _combine(manifest_json, tensors, names, sums):
    h = hashlib.sha256(manifest_json.encode())
    sums = iter(sums)
    for key in names:
        a = tensors[key]
        h.update(f"\0{key}\0{a.dtype.str}\0{list(a.shape)}\0".encode())
        for _ in range(0, a.nbytes, _CHUNK):
            h.update(next(sums))
    return h.hexdigest()


def digest(manifest_json, tensors, version=2):
    """The checksum of a manifest and the tensors {name: little-endian array}."""
    names = sorted(tensors)
    if version == 1:
        h = hashlib.sha256(manifest_json.encode())
        for key in names:
            a = tensors[key]
            h.update(f"\0{key}\0{a.dtype.str}\0{a.shape}\0".encode())
            h.update(_bytes(a))
        return h.hexdigest()
    sums = _ChunkSums([_bytes(tensors[k]) for k in names], _cores() - 1).wait()
    return _combine(manifest_json, tensors, names, sums)


# ---------------------------------------------------------------- writing

def _write_all(f, data):
    view = memoryview(data)
    while view:                             # (a raw write may write less than asked)
        view = view[f.write(view):]


def _header(tensors, order, metadata):
    header, offset = {}, 0
    for key in order:
        a = tensors[key]
        header[key] = {"dtype": _CODE_OF[a.dtype.str], "shape": list(a.shape),
                       "data_offsets": [offset, offset + a.nbytes]}
        offset += a.nbytes
    header["__metadata__"] = metadata
    head = json.dumps(header, separators=(",", ":")).encode()
    head += b" " * (-len(head) % 8)
    return len(head).to_bytes(8, "little") + head


def write(path, tensors, manifest_json):
    """Write {name: little-endian array} with the manifest and the checksum in the header's
    metadata to ``path``, atomically: a temp file in the same folder, fsync'ed, renamed over
    ``path``, the folder fsync'ed. A crash at any moment leaves the old file or the new.

    The checksum is computed while the data is written (the header goes first with a
    placeholder of the digest's length, then again with the digest, before the fsync)."""
    order = sorted(tensors, key=lambda k: (-tensors[k].itemsize, k))   # aligned offsets
    names = sorted(tensors)
    views = {k: _bytes(tensors[k]) for k in names}
    sums = _ChunkSums([views[k] for k in names], max(1, _cores() - 1))
    head = _header(tensors, order, {"flowgrad": manifest_json, "sha256": "0" * 64})
    parts = [head] + [views[k] for k in order]

    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp",
                               dir=folder)
    try:
        with os.fdopen(fd, "wb", buffering=0) as f:
            for part in parts:
                _write_all(f, part)
            sha = _combine(manifest_json, tensors, names, sums.wait())
            final = _header(tensors, order, {"flowgrad": manifest_json, "sha256": sha})
            if len(final) != len(head):     # (cannot happen: a digest has 64 characters)
                raise CheckpointError(f"{path}: the header changed size while writing")
            f.seek(0)
            _write_all(f, final)
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    if hasattr(os, "O_DIRECTORY"):          # the rename itself survives a power cut
        dfd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)


# ---------------------------------------------------------------- reading

def _read_into(f, view):
    got = 0
    while got < len(view):
        n = f.readinto(view[got:])
        if not n:
            return got
        got += n
    return got


def _layout(header, data_size, bad):
    """[(name, dtype, shape, begin, end)] of a parsed header, in file order, checked."""
    entries = []
    for name, info in header.items():
        if name == "__metadata__":
            continue
        try:
            dt = _BY_CODE[info["dtype"]]
            shape = tuple(info["shape"])
            begin, end = info["data_offsets"]
            ok = all(type(s) is int and s >= 0 for s in shape) and \
                type(begin) is int and type(end) is int
        except (KeyError, TypeError, ValueError):
            ok = False
        if not ok:
            raise CheckpointError(f"{bad} (the header's entry for {name!r} is damaged)")
        nbytes = int(np.prod(shape, dtype=np.int64)) * dt.itemsize
        if end - begin != nbytes:
            raise CheckpointError(f"{bad} ({name!r}: {list(shape)} {info['dtype']} needs "
                                  f"{nbytes} bytes, the header gives it {end - begin})")
        entries.append((name, dt, shape, begin, end))
    entries.sort(key=lambda e: e[3])
    at = 0
    for name, _, _, begin, end in entries:
        if begin != at:
            raise CheckpointError(f"{bad} (the header's offsets leave a gap or overlap "
                                  f"at {name!r})")
        at = end
    if at != data_size:
        what = "truncated" if at > data_size else "has trailing bytes"
        raise CheckpointError(f"{bad} ({what}: the header describes {at} bytes of data, "
                              f"the file has {data_size})")
    return entries


def read(path):
    """(tensors {name: native array}, metadata {str: str}, check) of a checkpoint file;
    ``check(manifest_json, version)`` raises CheckpointError unless the stored checksum
    matches. Damaged or truncated files raise CheckpointError naming ``path``."""
    bad = f"{path}: not a whole flowgrad checkpoint"
    try:
        f = open(path, "rb", buffering=0)
    except FileNotFoundError:
        raise CheckpointError(f"{path}: no such checkpoint file") from None
    except OSError as e:
        raise CheckpointError(f"{path}: cannot be read ({e})") from None
    try:
        with f:
            size = os.fstat(f.fileno()).st_size
            if size < 8:
                raise CheckpointError(f"{bad} (truncated to {size} bytes)")
            first = bytearray(8)
            _read_into(f, memoryview(first))
            n = int.from_bytes(first, "little")
            if n > size - 8:
                raise CheckpointError(f"{bad} (truncated: its header needs {n} bytes, the "
                                      f"file has {size - 8})")
            if n > _MAX_HEADER:
                raise CheckpointError(f"{bad} (a header of {n} bytes)")
            raw = bytearray(n)
            _read_into(f, memoryview(raw))
            try:
                header = json.loads(raw)
                meta = header.get("__metadata__") or {}
                if not isinstance(meta, dict):
                    raise TypeError
            except (ValueError, AttributeError, TypeError):
                raise CheckpointError(f"{bad} (its header is damaged or it was not written "
                                      f"by tf.train.Checkpoint)") from None
            tensors = {}
            for name, dt, shape, begin, end in _layout(header, size - 8 - n, bad):
                a = np.empty(shape, dtype=dt)
                if _read_into(f, _bytes(a)) != end - begin:
                    raise CheckpointError(f"{bad} (truncated while reading {name!r})")
                tensors[name] = a
    except CheckpointError:
        raise
    except OSError as e:
        raise CheckpointError(f"{path}: cannot be read ({e})") from None

    def check(manifest_json, version):
        stored = meta.get("sha256")
        found = digest(manifest_json, tensors, version)
        if found != stored:
            raise CheckpointError(f"{path}: checksum mismatch, the file is corrupted "
                                  f"(SHA-256 stored {str(stored)[:16]}..., computed "
                                  f"{found[:16]}...); nothing was restored")
    if sys.byteorder != "little":
        native = {k: a.astype(a.dtype.newbyteorder("=")) for k, a in tensors.items()}
    else:
        native = tensors
    return native, meta, check
