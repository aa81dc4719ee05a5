"""The checkpoint file itself (flowgrad/train/checkpoint_file.py): the safetensors layout
read and written both ways with the safetensors package, the chunked SHA-256 worked out
here from its documented definition, damaged headers, version 1 files, and Ctrl-C while the
checksum threads run (issue 16)."""
import faulthandler
import hashlib
import json
import threading

import numpy as np
import pytest

import flowgrad as tf
from flowgrad.train import checkpoint_file as CF

st = pytest.importorskip("safetensors.numpy", reason="the test extra: pip install -e '.[test]'")

MiB = 1 << 20


def _sha_by_hand(manifest_json, arrays, chunk=8 * MiB):
    """The version 2 checksum from its definition: SHA-256 of the manifest, then per
    tensor in name order its name, dtype, shape and the SHA-256 of each 8 MiB chunk."""
    h = hashlib.sha256(manifest_json.encode())
    for name in sorted(arrays):
        a = arrays[name]
        h.update(b"\0" + name.encode() + b"\0" + a.dtype.str.encode() + b"\0" +
                 str(list(a.shape)).encode() + b"\0")
        raw = a.tobytes()
        for i in range(0, len(raw), chunk):
            h.update(hashlib.sha256(raw[i:i + chunk]).digest())
    return h.hexdigest()


def _header(path):
    data = open(path, "rb").read()
    n = int.from_bytes(data[:8], "little")
    return data, n, json.loads(data[8:8 + n])


def _vars(sizes, seed=0):
    r = np.random.default_rng(seed)
    return {f"v{i}": tf.variable(tf.tensor(r.standard_normal(n).astype(np.float32)))
            for i, n in enumerate(sizes)}


def test_the_checksum_is_the_documented_chunked_sha256(tmp_path, monkeypatch):
    monkeypatch.setattr(CF, "_PARALLEL_FROM", 0)        # threads even for these sizes
    vs = _vars([3 * MiB, 5 * MiB // 4, 7, 0])           # 12 MiB (2 chunks), 5 MiB, tiny, empty
    try:
        path = tf.train.Checkpoint(**vs).write(tmp_path / "c.safetensors")
        data, n, header = _header(path)
        meta = header["__metadata__"]
        arrays = {k: v.numpy() for k, v in vs.items()}
        assert meta["sha256"] == _sha_by_hand(meta["flowgrad"], arrays)
        assert CF.digest(meta["flowgrad"], arrays) == meta["sha256"]
        assert n % 8 == 0                                # data aligned as safetensors pads it
    finally:
        tf.dispose(list(vs.values()))


def test_files_written_by_the_safetensors_package_are_read(tmp_path):
    """The package orders tensors its own way: flowgrad reads the header, not an order."""
    w = tf.variable(tf.tensor([[1.0, 2.0], [3.0, 4.0]]))
    k = tf.variable(tf.tensor([1, 2, 3], dtype="int32"))
    m = tf.variable(tf.tensor([True, False]))
    try:
        ckpt = tf.train.Checkpoint(w=w, k=k, m=m)
        path = ckpt.write(tmp_path / "ours.safetensors")
        arrays = st.load_file(path)
        meta = _header(path)[2]["__metadata__"]
        other = tmp_path / "theirs.safetensors"
        st.save_file({name: arrays[name] for name in reversed(sorted(arrays))}, other,
                     metadata=meta)
        for v in (w, k, m):
            v.assign(tf.zeros_like(v))
        ckpt.restore(other)
        np.testing.assert_array_equal(w.numpy(), [[1.0, 2.0], [3.0, 4.0]])
        np.testing.assert_array_equal(k.numpy(), [1, 2, 3])
        np.testing.assert_array_equal(m.numpy(), [True, False])
    finally:
        tf.dispose([w, k, m])


def test_version_1_files_still_verify(tmp_path):
    """Version 1: one SHA-256 over each tensor's bytes (no chunks), worked out here."""
    w = tf.variable(tf.tensor([0.5, -1.5, 2.0]))
    try:
        ckpt = tf.train.Checkpoint(w=w)
        path = ckpt.write(tmp_path / "v2.safetensors")
        manifest = json.loads(_header(path)[2]["__metadata__"]["flowgrad"])
        manifest["version"] = 1
        mj = json.dumps(manifest, sort_keys=True)
        a = np.array([0.5, -1.5, 2.0], dtype="<f4")
        h = hashlib.sha256(mj.encode())
        h.update(b"\0w\0<f4\0(3,)\0" + a.tobytes())
        old = tmp_path / "v1.safetensors"
        st.save_file({"w": a}, old, metadata={"flowgrad": mj, "sha256": h.hexdigest()})
        w.assign(tf.zeros([3]))
        ckpt.restore(old)
        np.testing.assert_array_equal(w.numpy(), a)
        # and a wrong version-1 checksum is caught like any other
        st.save_file({"w": a}, old, metadata={"flowgrad": mj, "sha256": "0" * 64})
        with pytest.raises(tf.CheckpointError, match="checksum mismatch"):
            ckpt.restore(old)
    finally:
        w.dispose()


def _rewrite_header(path, change):
    data, n, header = _header(path)
    change(header)
    head = json.dumps(header).encode()
    head += b" " * (-len(head) % 8)
    open(path, "wb").write(len(head).to_bytes(8, "little") + head + data[8 + n:])


@pytest.mark.parametrize("damage, message", [
    (lambda h: h["a"].update(data_offsets=[0, 4]), "needs 8 bytes"),
    (lambda h: h["a"].update(dtype="F16"), "entry for 'a' is damaged"),
    (lambda h: h["a"].update(shape=[2.0]), "entry for 'a' is damaged"),
    (lambda h: h["b"].update(data_offsets=[12, 20]), "gap or overlap"),
    (lambda h: h["b"].update(shape=[4], data_offsets=[8, 24]), "truncated"),
    (lambda h: h["b"].update(shape=[1], data_offsets=[8, 12]), "trailing bytes"),
    (lambda h: h.update(__metadata__=[1]), "header is damaged"),
])
def test_damaged_headers_name_the_file_and_restore_nothing(damage, message, tmp_path):
    a = tf.variable(tf.tensor([1.0, 2.0]))
    b = tf.variable(tf.tensor([3.0, 4.0]))
    try:
        ckpt = tf.train.Checkpoint(a=a, b=b)
        path = ckpt.write(tmp_path / "d.safetensors")
        _rewrite_header(path, damage)
        a.assign(tf.zeros([2]))
        with pytest.raises(tf.CheckpointError, match=rf"{path}: .*{message}"):
            ckpt.restore(path)
        np.testing.assert_array_equal(a.numpy(), [0.0, 0.0])
        np.testing.assert_array_equal(b.numpy(), [3.0, 4.0])
    finally:
        tf.dispose([a, b])


def test_ctrl_c_while_the_checksum_threads_run_leaves_nothing_locked(tmp_path, monkeypatch):
    """Interrupts at sampled points of a save and of a restore whose checksums run on
    threads (Thread.start/join included): afterwards saves and restores work, nothing is
    half restored, and no checksum thread is left running."""
    from test_atomic_updates import run_interrupted
    monkeypatch.setattr(CF, "_PARALLEL_FROM", 0)
    vs = _vars([3 * MiB, 3 * MiB])                      # 2 x 12 MiB: 4 chunks
    faulthandler.dump_traceback_later(120, exit=True)   # a deadlock fails, not hangs
    try:
        ckpt = tf.train.Checkpoint(**vs)
        good = ckpt.write(tmp_path / "good.safetensors")
        saved = {k: v.numpy().tobytes() for k, v in vs.items()}
        target = tmp_path / "t.safetensors"
        for call in (lambda: ckpt.write(target), lambda: ckpt.restore(good)):
            n = run_interrupted(call, None).n
            for k in range(1, n + 1, max(1, n // 25)):
                vs["v0"].assign(tf.zeros_like(vs["v0"]))
                run_interrupted(call, k)
                now = {key: v.numpy().tobytes() for key, v in vs.items()}
                if now["v0"] != saved["v0"]:                 # not restored: v1 untouched
                    assert now["v1"] == saved["v1"]
                ckpt.restore(good)                            # still works at once
                assert {key: v.numpy().tobytes() for key, v in vs.items()} == saved
        ckpt.write(target)
        ckpt.restore(target)
        for t in threading.enumerate():
            if t.name == "flowgrad-checksum":
                t.join(30)
                assert not t.is_alive()
    finally:
        faulthandler.cancel_dump_traceback_later()
        tf.dispose(list(vs.values()))


def test_a_header_claiming_too_many_bytes_is_refused(tmp_path, monkeypatch):
    w = tf.variable(tf.tensor([1.0]))
    try:
        path = tf.train.Checkpoint(w=w).write(tmp_path / "h.safetensors")
        monkeypatch.setattr(CF, "_MAX_HEADER", 16)      # (the real limit is 100 MiB)
        with pytest.raises(tf.CheckpointError, match=rf"{path}: not a whole flowgrad "
                                                     rf"checkpoint \(a header of \d+ bytes\)"):
            tf.train.Checkpoint(w=w).restore(path)
    finally:
        w.dispose()
