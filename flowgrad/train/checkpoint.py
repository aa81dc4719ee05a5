"""Checkpoints: save a training run and resume it exactly (``tf.train.Checkpoint``,
``tf.train.CheckpointManager``, ``tf.train.latest_checkpoint``).

What a checkpoint holds: every variable's values, dtype and shape (under the keyword path
it was given: ``Checkpoint(w1=w1, layers=[w2, b2])`` names them ``w1``, ``layers/0``,
``layers/1``), every optimizer's class, hyper-parameters, step count and slots (keyed by
the path of their variable, so a new process with new variable names restores them), the
state of flowgrad's random functions, and the save counter. Restoring all of it makes
training continue bit for bit as if it had never stopped.

The file is a safetensors file (a plain, documented format: an 8-byte header length, a JSON
header, the raw tensor bytes; no pickle, readable by every framework); the header's
metadata holds a JSON manifest of the above and a SHA-256 of the manifest and of every
tensor's name, dtype, shape and bytes (see checkpoint_file.py). Writing is atomic: a
temporary file in the same folder, fsync'ed, then renamed over the target (and the folder
fsync'ed), so a crash or ``kill -9`` at any moment leaves the previous checkpoint whole.
Restoring reads and verifies everything first, then changes the live objects in one commit
that an interrupt cannot leave half done: a bad file changes nothing.
"""
from __future__ import annotations

import json
import os
import re
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from .. import dtypes
from .. import engine as E
from .. import scopes
from ..arg_checks import as_int, describe, flag
from ..errors import ArgumentError, CheckpointError
from ..tensor import Variable
from . import checkpoint_file as CF
from . import ranks, update  # ranks: rank 0 writes (tf.distributed, above, says which)
from .optimizers import Optimizer
from .schedules import Schedule

if TYPE_CHECKING:
    from typing import Union
    _Path = Union[str, os.PathLike[str]]

FORMAT = "flowgrad-checkpoint"
VERSION = 2             # 2: the checksum hashes 8 MiB chunks (1 still reads)
SUFFIX = ".safetensors"
_SAFE_DTYPES = tuple(CF.CODES)


# ---------------------------------------------------------------- what is checkpointed

def _inner(obj):
    """An optimizer wrapped by tf.distributed's DistributedOptimizer is checkpointed as
    itself (its slots are the wrapped optimizer's)."""
    inner = getattr(obj, "__dict__", {}).get("optimizer")
    return inner if isinstance(inner, Optimizer) else obj


def _flatten(objects, prefix=""):
    """[(path, Variable or Optimizer)] of a nested dict/list/tuple, in a fixed order."""
    out = []
    items = objects.items() if isinstance(objects, dict) else enumerate(objects)
    for key, obj in items:
        if isinstance(key, str):
            if not key or "/" in key:
                raise ArgumentError(f"Checkpoint: names must be non-empty and without '/', "
                                    f"got {key!r}")
        elif not isinstance(key, int):
            raise ArgumentError(f"Checkpoint: dict keys must be strings, got {describe(key)}")
        path = f"{prefix}{key}"
        obj = _inner(obj)
        if isinstance(obj, (Variable, Optimizer)):
            out.append((path, obj))
        elif isinstance(obj, (dict, list, tuple)):
            out.extend(_flatten(obj, path + "/"))
        else:
            raise ArgumentError(f"Checkpoint: '{path}' must be a tf.variable, a tf.train "
                                f"optimizer, or a dict/list/tuple of them, got "
                                f"{describe(obj)}")
    return out


class _Layout:
    """The live objects of a Checkpoint, by path, checked once."""

    def __init__(self, objects):
        entries = _flatten(objects)
        self.variables, self.optimizers, seen = {}, {}, {}
        for path, obj in entries:
            if id(obj) in seen:
                raise ArgumentError(f"Checkpoint: the same object is named both "
                                    f"'{seen[id(obj)]}' and '{path}'")
            seen[id(obj)] = path
            (self.variables if isinstance(obj, Variable) else self.optimizers)[path] = obj
        self.path_of = {id(v): p for p, v in self.variables.items()}


def _describe_lr(lr):
    if isinstance(lr, Schedule):
        return {"schedule": type(lr).__name__, "config": _jsonable(dict(lr.get_config()))}
    return lr


def _jsonable(v):
    if isinstance(v, (bool, int, float, str)) or v is None:
        return v
    if isinstance(v, (np.integer, np.floating, np.bool_)):
        return v.item()
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    return repr(v)


def _state(ckpt):
    """(tensors by key, manifest) of the live objects, read under update.STATE_LOCK: one
    step's state even while another thread trains (the arrays read are never written
    again: a step gives its variables and slots new ones)."""
    # NOTE: the result is stored inside the with block and returned after it: the
    # instruction after a ``return f()`` inside a ``with`` lies outside the block's
    # handler, and an interrupt landing there kept the lock held forever
    with update.STATE_LOCK:
        state = _read_state(ckpt)
    return state


def _read_state(ckpt):
    lay = ckpt._layout
    tensors, manifest = {}, {"format": FORMAT, "version": VERSION,
                             "save_counter": ckpt.save_counter, "variables": {},
                             "optimizers": {}}
    for path, v in lay.variables.items():
        if v.is_disposed:
            raise CheckpointError(f"Checkpoint: variable '{path}' ('{v.name}') is disposed")
        if v.dtype not in _SAFE_DTYPES:
            raise CheckpointError(f"Checkpoint: variable '{path}' is a {v.dtype} tensor; "
                                  f"checkpoints hold {', '.join(_SAFE_DTYPES)}")
        tensors[path] = CF.little_endian(E.to_host(v._data), v.dtype)
        manifest["variables"][path] = {"name": v.name, "dtype": v.dtype,
                                       "shape": list(v.shape), "trainable": v.trainable}
    for path, opt in lay.optimizers.items():
        opt.check_alive()
        update.prune(opt)
        slots = {}
        for ref, table in opt.slot_table.values():
            var = ref()
            if var is None:
                continue
            vpath = lay.path_of.get(id(var))
            if vpath is None:
                raise CheckpointError(
                    f"Checkpoint: optimizer '{path}' has state (slots) for variable "
                    f"'{var.name}', which this Checkpoint does not name: add the variable "
                    f"to it, or training cannot resume exactly")
            keys = {}
            for slot, s in table.items():
                key = f"{path}.slots/{vpath}/{slot}"
                tensors[key] = CF.little_endian(E.to_host(s._data), s.dtype)
                keys[slot] = key
            slots[vpath] = keys
        cfg = {k: _jsonable(_describe_lr(v) if k == "learning_rate" else v)
               for k, v in opt.get_config().items()}
        manifest["optimizers"][path] = {"class": opt.class_name, "config": cfg,
                                        "iterations": int(opt.iterations),
                                        "skipped_steps": int(opt.skipped_steps),
                                        "slots": slots}
    clash = set(manifest["variables"]) & {k for k in tensors if ".slots/" in k}
    if clash:
        raise ArgumentError(f"Checkpoint: the name {sorted(clash)[0]!r} is taken by an "
                            f"optimizer's slot: rename the variable")
    from ..ops import creation
    manifest["rng"] = _jsonable(creation.random_generator().bit_generator.state)
    return tensors, manifest


def _read(path):
    """(tensors, manifest) of a checkpoint file, verified; CheckpointError otherwise."""
    path = os.fspath(path)
    tensors, meta, check = CF.read(path)
    bad = f"{path}: not a whole flowgrad checkpoint"
    try:
        manifest_json = meta["flowgrad"]
        manifest = json.loads(manifest_json)
        version = manifest.get("version")
    except (ValueError, KeyError, AttributeError, TypeError):
        raise CheckpointError(f"{bad} (its header is damaged or it was not written by "
                              f"tf.train.Checkpoint)") from None
    if manifest.get("format") != FORMAT or type(version) is not int or version < 1:
        raise CheckpointError(f"{bad} (format {manifest.get('format')!r}, version "
                              f"{version!r})")
    if version > VERSION:
        raise CheckpointError(f"{path}: written by a newer flowgrad (checkpoint format "
                              f"{version}, this one reads up to {VERSION})")
    check(manifest_json, version)
    return tensors, manifest


# ---------------------------------------------------------------- Checkpoint

class Checkpoint:
    """The state of a training run: variables and optimizers under keyword names (nested
    dicts, lists and tuples welcome).

    >>> import flowgrad as tf, tempfile, os
    >>> w = tf.variable(tf.tensor([1.0, 2.0]), name="w_ckpt_doc")
    >>> opt = tf.train.adam(0.1)
    >>> opt.minimize(lambda: (w * w).sum())
    >>> ckpt = tf.train.Checkpoint(optimizer=opt, w=w)
    >>> folder = tempfile.mkdtemp()
    >>> path = ckpt.save(os.path.join(folder, "ckpt"))
    >>> os.path.basename(path)
    'ckpt-1.safetensors'
    >>> saved = w.numpy()
    >>> opt.minimize(lambda: (w * w).sum())        # train on ...
    >>> ckpt.restore(path)                         # ... and go back
    >>> bool((w.numpy() == saved).all()), opt.iterations
    (True, 1)
    >>> w.dispose(); opt.dispose()
    """

    def __init__(self, **objects: Any) -> None:
        if not objects:
            raise ArgumentError("Checkpoint() needs the variables and optimizers to save, "
                                "as keywords: Checkpoint(optimizer=opt, w1=w1, ...)")
        self._layout = _Layout(objects)
        self.save_counter = 0       # checkpoints saved (and restored) so far: numbers files

    def save(self, prefix: _Path) -> str:
        """Write ``{prefix}-{n}.safetensors`` (n: one more than the last save, or than the
        restored checkpoint's); returns its path. Under tf.distributed only rank 0 writes,
        and every rank returns once the file is whole."""
        n = self.save_counter + 1
        path = f"{_path(prefix, 'prefix', 'Checkpoint.save')}-{n}{SUFFIX}"
        self.save_counter = n
        try:
            self.write(path)
        except BaseException:
            self.save_counter = n - 1
            raise
        return path

    def write(self, path: _Path) -> str:
        """Write the checkpoint to exactly ``path`` (atomically); returns it."""
        path = _path(path, "path", "Checkpoint.write")
        tensors, manifest = _state(self)
        rank, _ = ranks.rank_and_size()
        if rank == 0:
            manifest_json = json.dumps(manifest, sort_keys=True)
            try:
                CF.write(path, tensors, manifest_json)
            except OSError as e:
                raise CheckpointError(f"Checkpoint.write: {path}: cannot be written ({e})"
                                      ) from None
        ranks.barrier()
        return path

    def restore(self, path: _Path, partial: bool = False) -> None:
        """Load ``path`` into the live objects, all or nothing: the file is verified and
        every variable, optimizer and slot matched (name, dtype, shape, class) before
        anything changes. Optimizers get their slots, step count and numeric
        hyper-parameters back (a learning-rate schedule is code: the one the program built
        stays, driven by the restored step count). ``partial=True`` ignores objects of the
        file that this Checkpoint does not name (e.g. an optimizer, to load weights only)."""
        path = _path(path, "path", "Checkpoint.restore")
        partial = flag(partial, "partial", "Checkpoint.restore")
        tensors, manifest = _read(path)
        scopes.tidy(lambda: _restore(self, path, tensors, manifest, partial))

    def __repr__(self):
        lay = self._layout
        return (f"Checkpoint({len(lay.variables)} variables, {len(lay.optimizers)} "
                f"optimizers: {', '.join(list(lay.variables) + list(lay.optimizers))})")


def _mismatch(path, what, want, found):
    return CheckpointError(f"{path}: {what}: expected {want} (the live object), found "
                           f"{found} in the file; nothing was restored")


def _carrier(arr, var):
    """A private tensor holding ``arr`` (read from the file into an array nobody else
    holds: no copy); the target trades arrays with it."""
    if arr.dtype != dtypes.NP[var.dtype]:
        arr = arr.astype(dtypes.NP[var.dtype])
    return E.make_tensor(E.from_host(arr))


def _restore(ckpt, path, tensors, manifest, partial):
    lay = ckpt._layout
    saved_vars, saved_opts = manifest["variables"], manifest["optimizers"]
    if not partial:
        extra = sorted(set(saved_vars) - set(lay.variables)) + \
            sorted(set(saved_opts) - set(lay.optimizers))
        if extra:
            raise CheckpointError(f"{path}: holds {', '.join(map(repr, extra))}, which this "
                                  f"Checkpoint does not name; name them, or pass "
                                  f"partial=True to leave them; nothing was restored")
    var_swaps = []
    for vpath, var in lay.variables.items():
        info = saved_vars.get(vpath)
        if info is None:
            raise CheckpointError(f"{path}: no variable '{vpath}' in the file (it has: "
                                  f"{', '.join(saved_vars) or 'none'}); nothing was restored")
        arr = tensors.get(vpath)
        if arr is None or info["dtype"] != var.dtype or tuple(info["shape"]) != var.shape \
                or tuple(arr.shape) != var.shape:
            raise _mismatch(path, f"variable '{vpath}'", f"{var.dtype} {list(var.shape)}",
                            f"{info['dtype']} {info['shape']}")
        if var.is_disposed:
            raise CheckpointError(f"{path}: the live variable '{vpath}' is disposed")
        c = _carrier(arr, var)
        var_swaps.append((var, c, c._data, c._buf, var._data, var._buf))
    plans = []
    try:
        for opath, opt in lay.optimizers.items():
            info = saved_opts.get(opath)
            if info is None:
                raise CheckpointError(f"{path}: no optimizer '{opath}' in the file (it has: "
                                      f"{', '.join(saved_opts) or 'none'}); nothing was "
                                      f"restored")
            if info["class"] != opt.class_name:
                raise _mismatch(path, f"optimizer '{opath}'", opt.class_name, info["class"])
            _check_options(path, opath, opt, info["config"])
            opt.check_alive()
            update.prune(opt)
            plan = update.Plan(opt, as_int(info["iterations"], "iterations", path, 0),
                               counts=False)
            plans.append(plan)
            for vpath, keys in info["slots"].items():
                var = lay.variables.get(vpath)
                if var is None:
                    raise CheckpointError(f"{path}: optimizer '{opath}' has slots for "
                                          f"variable '{vpath}', which this Checkpoint does "
                                          f"not name; nothing was restored")
                if set(keys) != set(opt.slot_names):
                    raise _mismatch(path, f"the slots of '{vpath}' in '{opath}'",
                                    sorted(opt.slot_names), sorted(keys))
                live = plan.slots(var)
                for slot, key in keys.items():
                    arr = tensors.get(key)
                    if arr is None or tuple(arr.shape) != var.shape:
                        raise _mismatch(path, f"slot '{slot}' of '{vpath}' in '{opath}'",
                                        list(var.shape),
                                        "nothing" if arr is None else list(arr.shape))
                    plan.put(live[slot], _carrier(arr, live[slot]))
            for vpath, var in lay.variables.items():
                entry = opt.slot_table.get(id(var))
                if vpath in info["slots"] or entry is None or entry[0]() is not var:
                    continue
                # slots made after the save (the variable had no step then): back to their
                # first values, as they were in the run that saved
                for slot, first in opt.slot_init(var).items():
                    plan.put(entry[1][slot], first)
    except BaseException:
        for p in plans:
            p.abandon()
        raise
    hyper = [(opt, _hyper(opt, saved_opts[p]["config"]), int(saved_opts[p]["skipped_steps"]))
             for p, opt in lay.optimizers.items()]
    from ..ops import creation
    rng = creation.random_generator().bit_generator
    args = (var_swaps, plans, hyper, rng, manifest.get("rng"), ckpt,
            int(manifest.get("save_counter", 0)))
    with update.STATE_LOCK:
        update.commit_fully(_commit, args)       # (an interrupt: the restore completes)


def _check_options(path, opath, opt, saved):
    """An optimizer's switches (use_nesterov, centered, use_updated_accumulator) choose its
    update rule and slots: the program's, never changed by a restore, so a file saved with
    others is a mismatch (a resumed run would silently follow another rule)."""
    live = opt.get_config()
    for key in sorted({k for c in (live, saved) for k, v in c.items() if isinstance(v, bool)}):
        want, found = bool(live.get(key, False)), bool(saved.get(key, False))
        if want != found:
            raise _mismatch(path, f"{key} of optimizer '{opath}'", want, found)


def _hyper(opt, saved):
    """The optimizer's attributes to set from the saved config: numbers only (a learning
    rate schedule is code, rebuilt by the program; the restored step count drives it)."""
    out = {}
    for key, value in saved.items():
        if key == "learning_rate":
            if isinstance(value, (int, float)) and not isinstance(value, bool) and \
                    not isinstance(opt.learning_rate, Schedule):
                out["_learning_rate"] = value
        elif isinstance(value, (int, float)) and not isinstance(value, bool) \
                and key in vars(opt):
            out[key] = value
    return out


def _commit(var_swaps, plans, hyper, rng, rng_state, ckpt, counter):
    # only stores of values computed beforehand (see train/update.py): rerunning it after
    # an interrupt gives the same result
    for target, carrier, new, new_buf, old, old_buf in var_swaps:
        target._data = new
        target._buf = new_buf
        carrier._data = old
        carrier._buf = old_buf
    for plan in plans:
        plan.store()
    for opt, attrs, skipped in hyper:
        d = opt.__dict__
        for k, v in attrs.items():
            d[k] = v
        d["skipped_steps"] = skipped
    if rng_state is not None and rng.state != rng_state:
        rng.state = rng_state
    ckpt.save_counter = counter


# ---------------------------------------------------------------- finding checkpoints

_NUMBERED = re.compile(r"^(?P<name>.+)-(?P<n>\d+)" + re.escape(SUFFIX) + "$")


def _path(p, what, api):
    """A path argument as a string (str or os.PathLike; bytes paths are not taken)."""
    try:
        s = os.fspath(p)
    except TypeError:
        s = None
    if not isinstance(s, str) or not s:
        raise ArgumentError(f"{api}: {what} must be a path (a non-empty string or a "
                            f"pathlib.Path), got {describe(p)}")
    return s


def _numbered(directory, name=None):
    """[(number, path)] of the numbered checkpoint files in ``directory``, oldest first."""
    try:
        names = os.listdir(directory)
    except (FileNotFoundError, NotADirectoryError):
        return []
    out = []
    for f in names:
        m = _NUMBERED.match(f)
        if m and (name is None or m["name"] == name):
            out.append((int(m["n"]), os.path.join(directory, f)))
    return sorted(out)


def latest_checkpoint(directory: _Path, checkpoint_name: str | None = None
                      ) -> str | None:
    """The newest checkpoint in ``directory`` (of ``checkpoint_name`` if given): the one
    with the highest number, or None. A numbered file appears only whole (it is renamed into
    place once written), so the newest is always whole.

    >>> import flowgrad as tf, tempfile
    >>> tf.train.latest_checkpoint(tempfile.mkdtemp()) is None
    True
    """
    directory = _path(directory, "directory", "latest_checkpoint")
    if checkpoint_name is not None and not isinstance(checkpoint_name, str):
        raise ArgumentError(f"latest_checkpoint: checkpoint_name must be a file name (a "
                            f"string) or None, got {describe(checkpoint_name)}")
    found = _numbered(directory, checkpoint_name)
    return found[-1][1] if found else None


class CheckpointManager:
    """Numbered checkpoints in a folder: ``save()`` writes the next one and keeps the
    newest ``max_to_keep`` (None: all), ``restore_or_initialize()`` resumes from the
    newest, ``latest_checkpoint`` names it.

    >>> import flowgrad as tf, tempfile
    >>> w = tf.variable(tf.scalar(1.0), name="w_mgr_doc")
    >>> mgr = tf.train.CheckpointManager(tf.train.Checkpoint(w=w), tempfile.mkdtemp(),
    ...                                  max_to_keep=2)
    >>> mgr.restore_or_initialize() is None           # nothing saved yet: a fresh start
    True
    >>> paths = [mgr.save() for _ in range(3)]
    >>> [p.rsplit("/", 1)[-1] for p in mgr.checkpoints]
    ['ckpt-2.safetensors', 'ckpt-3.safetensors']
    >>> w.dispose()
    """

    def __init__(self, checkpoint: Checkpoint, directory: _Path, max_to_keep: int | None = 5,
                 checkpoint_name: str = "ckpt", init_fn: Callable[[], Any] | None = None
                 ) -> None:
        if not isinstance(checkpoint, Checkpoint):
            raise ArgumentError(f"CheckpointManager: checkpoint must be a "
                                f"tf.train.Checkpoint, got {describe(checkpoint)}")
        if max_to_keep is not None:
            max_to_keep = as_int(max_to_keep, "max_to_keep", "CheckpointManager", 1)
        if not isinstance(checkpoint_name, str) or not checkpoint_name or \
                "/" in checkpoint_name or os.sep in checkpoint_name:
            raise ArgumentError(f"CheckpointManager: checkpoint_name must be a file name, "
                                f"got {describe(checkpoint_name)}")
        if init_fn is not None and not callable(init_fn):
            raise ArgumentError("CheckpointManager: init_fn must be a function")
        self.checkpoint = checkpoint
        self.directory = _path(directory, "directory", "CheckpointManager")
        self.max_to_keep = max_to_keep
        self.checkpoint_name = checkpoint_name
        self.init_fn = init_fn

    @property
    def latest_checkpoint(self) -> str | None:
        """The newest whole checkpoint of this manager's folder and name, or None."""
        return latest_checkpoint(self.directory, self.checkpoint_name)

    @property
    def checkpoints(self) -> list[str]:
        """The checkpoints kept, oldest first."""
        return [p for _, p in _numbered(self.directory, self.checkpoint_name)]

    def save(self, checkpoint_number: int | None = None) -> str:
        """Write the next numbered checkpoint (or number ``checkpoint_number``), make it
        the latest, delete the oldest beyond ``max_to_keep``; returns its path."""
        found = _numbered(self.directory, self.checkpoint_name)
        if checkpoint_number is None:
            n = max([k for k, _ in found] + [self.checkpoint.save_counter]) + 1
        else:
            n = as_int(checkpoint_number, "checkpoint_number", "CheckpointManager.save", 0)
            if n >= 2 ** 63:        # (its file name must stay a file name)
                raise ArgumentError(f"CheckpointManager.save: checkpoint_number must be below "
                                    f"2**63, got an integer of {len(str(n))} digits")
        base = f"{self.checkpoint_name}-{n}{SUFFIX}"
        path = os.path.join(self.directory, base)
        before = self.checkpoint.save_counter
        self.checkpoint.save_counter = n
        try:
            self.checkpoint.write(path)
        except BaseException:
            self.checkpoint.save_counter = before
            raise
        rank, _ = ranks.rank_and_size()
        if rank == 0:
            self._prune(path)
        ranks.barrier()
        return path

    def _prune(self, newest):
        if self.max_to_keep is not None:
            kept = [p for _, p in _numbered(self.directory, self.checkpoint_name)]
            for old in [p for p in kept if p != newest][:max(0, len(kept) -
                                                                self.max_to_keep)]:
                _remove(old)
        # temporary files of saves that a crash interrupted (this process writes one at a
        # time, and only rank 0 writes)
        prefix = f".{self.checkpoint_name}-"
        for f in os.listdir(self.directory):
            if f.startswith(prefix) and f.endswith(".tmp"):
                _remove(os.path.join(self.directory, f))

    def restore_or_initialize(self) -> str | None:
        """Restore the newest checkpoint and return its path; with none, call ``init_fn``
        (if given) and return None."""
        path = self.latest_checkpoint
        if path is None:
            if self.init_fn is not None:
                self.init_fn()
            return None
        self.checkpoint.restore(path)
        return path

    def save_every_n_steps(self, n: int, optimizer: Optimizer | None = None
                           ) -> Callable[..., str | None]:
        """A hook for a training loop: ``hook(step)`` saves when ``step`` is a multiple of
        ``n`` (``hook()`` counts ``optimizer``'s updates instead) and returns the path, or
        None.

        >>> import flowgrad as tf, tempfile
        >>> w = tf.variable(tf.scalar(1.0), name="w_hook_doc")
        >>> mgr = tf.train.CheckpointManager(tf.train.Checkpoint(w=w), tempfile.mkdtemp())
        >>> hook = mgr.save_every_n_steps(2)
        >>> [hook(step) is not None for step in range(1, 5)]
        [False, True, False, True]
        >>> w.dispose()
        """
        n = as_int(n, "n", "save_every_n_steps", 1)
        if optimizer is not None:
            optimizer = _inner(optimizer)
            if not isinstance(optimizer, Optimizer):
                raise ArgumentError(f"save_every_n_steps: optimizer must be a tf.train "
                                    f"optimizer, got {describe(optimizer)}")

        def hook(step=None):
            if step is None:
                if optimizer is None:
                    raise ArgumentError("save_every_n_steps: call hook(step), or give the "
                                        "optimizer whose updates count the steps")
                step = optimizer.iterations
            step = as_int(step, "step", "save_every_n_steps hook", 0)
            return self.save() if step > 0 and step % n == 0 else None
        return hook

    def __repr__(self):
        return (f"CheckpointManager({self.directory!r}, name={self.checkpoint_name!r}, "
                f"max_to_keep={self.max_to_keep})")


def _remove(path):
    try:
        os.remove(path)
    except FileNotFoundError:
        pass
