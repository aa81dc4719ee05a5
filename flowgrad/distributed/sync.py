"""Arrival, timeouts, steps and exits: how a rank that stalls, leaves or falls out of step
ends the job instead of hanging it or corrupting it.

Every collective starts with a small header all-reduce (12 int64, ``Iallreduce`` with MAX
over each field and its negation, polled with ``Test``): it completes only when every rank
has arrived, so it is the one place that waits for late ranks, with a deadline. It also
carries what the rank is doing (the kind of collective, its argument, the bucket's values and
layout, the optimizer step, the global batch from ``batches()``): a field whose max differs
from its min means the ranks are out of step, and every rank raises the same
DistributedError before any data moves. Once every rank has arrived, the data travels with
MPI's blocking call (the fastest; ``Iallreduce`` of a 1 MB bucket is ~2x slower).

Control messages (a rank leaving, a rank asking who is there after a timeout) travel on a
communicator of their own and are read only while a rank waits, so the fast path never
looks at them.
"""
import atexit
import threading
import time
import zlib

import numpy as np

from ..errors import ArgumentError, DistributedError

# Like PyTorch's process groups (30 min): longer than any pause a healthy job makes while
# other ranks wait (rank-0-only evaluation, a checkpoint, a slow first step), short enough
# that a stalled job stops within the hour instead of holding its nodes until the
# scheduler's wall-clock limit.
DEFAULT_TIMEOUT = 1800.0
SPIN_S = 0.005          # poll without sleeping this long (a normal wait ends well within)
GRACE_S = 2.0           # after a timeout: how long to hear which ranks are waiting too
_TAG = 0x6667
_EXIT, _PROBE, _REPLY = 1, 2, 3        # control messages: [type, seq, state, 0]
_WAITING, _LEAVING = 1, 2
_NF = 6                                # header fields: kind, arg, values, layout, step, batch

GRADIENTS, ALL_REDUCE, BROADCAST, BARRIER, AGREE, BCAST_VARS = range(1, 7)


def check_timeout(timeout):
    """``init(timeout=...)`` checked: seconds as a float, or None (wait forever)."""
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or \
            not timeout > 0 or timeout != timeout:
        raise ArgumentError(f"tf.distributed.init(timeout={timeout!r}): timeout must be a "
                            f"number of seconds > 0, or None to wait forever")
    return float(timeout)


class _Sync:
    def __init__(self):
        self.seq = 0              # collectives this rank has entered
        self.step = 0             # the last DistributedOptimizer step entered
        self.what = None          # describe() of the collective being waited for
        self.leaving = False      # in the end-of-job handshake
        self.sends = []           # (request, buffer) of control messages in flight
        self.left = {}            # rank -> collectives it made before it left the job
        self.waiting = {}         # rank -> seq of the collective it said it waits in
        self.hdr = np.zeros(2 * _NF, np.int64)
        self.status = None


_sync = _Sync()
_local = threading.local()
# runtime.init() hands over the job's state and its way to abort the job (start()): this
# module never imports runtime, which imports it (no circle between the two)
_job = None
_abort_job = None


def reset():
    global _sync
    _sync = _Sync()


def start(job, abort_job):
    """Called by init() for size > 1, with the job's state (runtime.current_job(): rank,
    size, the communicators, the timeout) and ``abort_job(message, code, trailer)``, which
    ends every rank: the end-of-job handshake."""
    global _job, _abort_job
    _job, _abort_job = job, abort_job
    _sync.status = job.MPI.Status()
    atexit.register(_at_exit)


# ---------------------------------------------------------------- where the data is

def set_batch(epoch, index):
    """batches() says which global batch this thread just handed out (0 = none)."""
    _local.batch = ((int(epoch) & 0xFFFFFFF) << 32) | ((int(index) + 1) & 0xFFFFFFFF)


def _batch_text(code):
    if not code:
        return ""
    return f", at global batch {(code & 0xFFFFFFFF) - 1} of epoch {code >> 32}"


def layout_code(layout):
    """A hash of ``[(shape, dtype)]`` that is the same in every process (not hash())."""
    return zlib.crc32(repr([(tuple(s), str(d)) for s, d in layout]).encode())


# ---------------------------------------------------------------- entering a collective

def enter(kind, describe, arg=0, values=0, layout=0, step=0):
    """Wait until every rank is in this collective (with the deadline) and check they are
    all in the same one. ``describe()`` -> text, called only for messages."""
    s, sy = _job, _sync
    sy.seq += 1
    if step:
        sy.step = step
    fields = (kind, arg, values, layout, step, getattr(_local, "batch", 0))
    h = sy.hdr
    h[:_NF] = fields
    np.negative(h[:_NF], out=h[_NF:])
    req = s.coll.Iallreduce(s.MPI.IN_PLACE, h, op=s.MPI.MAX)
    if not req.Test():
        _wait_arrival(req, describe, fields)
    if (h[:_NF] + h[_NF:]).any():            # max != min somewhere: ranks differ
        _out_of_step(describe, fields)


def _what(describe, fields, numbered=True):
    text = describe()
    if fields[0] != GRADIENTS and _sync.step:
        text += f" after DistributedOptimizer step {_sync.step}"
    return text + _batch_text(fields[5]) + (f" (collective #{_sync.seq})" if numbered else "")


def _wait_arrival(req, describe, fields):
    s, sy = _job, _sync
    t0 = time.monotonic()
    spin_end, pause = t0 + SPIN_S, 0.0002
    deadline = None if s.timeout is None else t0 + s.timeout
    sy.what = lambda: _what(describe, fields)
    try:
        while not req.Test():
            now = time.monotonic()
            if now < spin_end:
                continue
            _service()
            if deadline is not None and now >= deadline:
                _timed_out(req, now - t0)
                return
            time.sleep(pause)
            pause = min(pause * 1.5, 0.002)
    except BaseException as e:     # Ctrl-C or a signal handler's SystemExit mid-collective:
        _fatal(f"{type(e).__name__} on rank {s.rank} while it waited in {sy.what()}: its "
               f"part of the collective cannot be taken back, so the job stops")
    finally:
        sy.what = None


# ---------------------------------------------------------------- control messages

def _send(dest, typ, seq, state=0):
    s, sy = _job, _sync
    buf = np.array([typ, seq, state, 0], np.int64)
    sy.sends = [(r, b) for r, b in sy.sends if not r.Test()]
    sy.sends.append((s.ctl.Isend(buf, dest=dest, tag=_TAG), buf))


def _service():
    """Read the control messages that arrived. While waiting in a collective, a rank that
    left the job ends it (it will never arrive)."""
    s, sy = _job, _sync
    MPI, st = s.MPI, sy.status
    while s.ctl.Iprobe(source=MPI.ANY_SOURCE, tag=_TAG, status=st):
        src = st.Get_source()
        buf = np.zeros(4, np.int64)
        s.ctl.Recv(buf, source=src, tag=_TAG)
        typ, seq, state = int(buf[0]), int(buf[1]), int(buf[2])
        if typ == _EXIT:
            sy.left[src] = seq
            if sy.what is not None:
                _fatal(f"rank {src} left the job (sys.exit() or the end of its script) "
                       f"after {seq} collective(s), while rank {s.rank} waits for it in "
                       f"{sy.what()}: it will never arrive, so the whole job stops instead "
                       f"of waiting forever. Every rank must make the same collective calls "
                       f"before it ends.", leader=_lowest_staying() == s.rank)
        elif typ == _PROBE:
            sy.waiting[src] = seq
            if sy.what is not None:
                _send(src, _REPLY, sy.seq, _WAITING)
            elif sy.leaving:
                _send(src, _REPLY, sy.seq, _LEAVING)
        elif typ == _REPLY:
            if state == _WAITING:
                sy.waiting[src] = seq
            else:
                sy.left[src] = seq


def _lowest_staying():
    s = _job
    return min(r for r in range(s.size) if r not in _sync.left)


def _timed_out(req, waited):
    """The deadline passed: ask every rank who is there, give them GRACE_S to answer (or
    to arrive after all), then end the job naming those that did not arrive."""
    s, sy = _job, _sync
    for r in range(s.size):
        if r != s.rank:
            _send(r, _PROBE, sy.seq)
    end = time.monotonic() + GRACE_S
    while time.monotonic() < end:
        if req.Test():
            return                        # the late rank arrived after all
        _service()
        time.sleep(0.002)
    here = sorted({s.rank} | {r for r, q in sy.waiting.items() if q == sy.seq})
    gone = sorted(set(sy.left) - set(here))
    missing = [r for r in range(s.size) if r not in here and r not in gone]
    text = (f"timeout: {sy.what()} did not complete within timeout={s.timeout:g} s: "
            f"{_ranks(missing)} did not arrive ({_ranks(here)} waited in it")
    text += (f"; {_ranks(gone)} had left the job)" if gone else ")")
    text += (". A rank that stalls (a deadlock, a hung read, a stopped process) or works "
             "alone for longer than the timeout (rank-0-only evaluation, a checkpoint) ends "
             "the job: pass a larger tf.distributed.init(timeout=...) for long pauses, or "
             "timeout=None to wait forever.")
    _fatal(text, leader=s.rank == here[0], code=124)


def _ranks(rs):
    if not rs:
        return "no rank"
    return ("rank " if len(rs) == 1 else "ranks ") + ", ".join(map(str, rs))


def _fatal(text, leader=True, code=1):
    """End the job with ``text``. Ranks that are not the leader give the leader's abort
    time to arrive first, so the job prints one message, then abort themselves."""
    if not leader:
        try:
            time.sleep(GRACE_S + 1.0)
        except BaseException:
            pass
    _abort_job(text, code, f"flowgrad.distributed: aborting all {_job.size} rank(s).")


# ---------------------------------------------------------------- out of step

def _out_of_step(describe, fields):
    """Every rank saw the same mismatch in the headers: gather what each is doing (they are
    all here, so the blocking call returns at once) and raise the same error everywhere."""
    s, sy = _job, _sync
    seq = sy.seq
    texts = s.coll.allgather(_what(describe, fields, numbered=False))
    groups = {}
    for r, t in enumerate(texts):
        groups.setdefault(t, []).append(r)
    parts = [f"{_ranks(rs)} {'is' if len(rs) == 1 else 'are'} in {t}" for t, rs in
             groups.items()]
    if len(groups) == 1:
        parts = [f"ranks enter {texts[0]} with different shapes, dtypes or arguments"]
    raise DistributedError(
        f"ranks are out of step at collective #{seq}: " + "; ".join(parts) + ". Every rank "
        f"must make the same collective calls in the same order with the same shapes, and "
        f"take its optimizer steps on the same global batches: a rank that skips or adds a "
        f"step (a `continue` on a bad batch, an all_reduce under `if rank == 0:`) would "
        f"average misaligned gradients, so every rank stops here.")


# ---------------------------------------------------------------- the end of the job

def _at_exit():
    """This rank is ending (the script returned, or sys.exit()): tell the others, then wait
    for every rank to end after as many collectives. A rank still waiting in a collective
    gets the message and ends the job (instead of waiting forever); if every rank ends in
    step, MPI_Finalize follows and the job exits normally."""
    s, sy = _job, _sync
    if s.size < 2 or s.ctl is None or s.MPI.Is_finalized():
        return
    sy.leaving = True
    for r in range(s.size):
        if r != s.rank:
            _send(r, _EXIT, sy.seq)
    deadline = None if s.timeout is None else time.monotonic() + s.timeout
    pause = 0.0002
    while len(sy.left) < s.size - 1:
        _service()
        if deadline is not None and time.monotonic() >= deadline:
            late = [r for r in range(s.size) if r != s.rank and r not in sy.left]
            _fatal(f"timeout: rank {s.rank} ended after {sy.seq} collective(s), but "
                   f"{_ranks(late)} did not end within timeout={s.timeout:g} s (stalled, "
                   f"or still working alone); the job stops instead of waiting forever.",
                   code=124)
        time.sleep(pause)
        pause = min(pause * 1.5, 0.005)
    counts = {**sy.left, s.rank: sy.seq}
    if len(set(counts.values())) > 1:
        _fatal("ranks ended after different numbers of collectives ("
               + ", ".join(f"rank {r}: {n}" for r, n in sorted(counts.items()))
               + "): they were out of step.", leader=s.rank == 0)
    end = time.monotonic() + GRACE_S
    while sy.sends and time.monotonic() < end:
        sy.sends = [(r, b) for r, b in sy.sends if not r.Test()]
