"""Each thread's engine state, the memory counters, and the parking of disposed tensors that
live gradient sessions still read: the one owner of the engine's mutable state.

Three modules read and write a thread's :class:`State` directly, because they are what it
is for: ``engine`` (the kernel entry: scope, counters, recording), ``recording`` (the gate
and the backward depth) and ``scopes`` (tidy). Everything else asks them through their
public functions (``recording.is_recording()``, ``engine.count_buffers(n)``...).

Threads: scopes, the recording gate and gradient sessions belong to the thread that opened
them; tensors may be read from any thread. Each thread counts into its own State and only
its own, so ``memory()`` (the sum) is exact without a lock on the kernel path.

Parking: a recorded tensor disposed while its session lives keeps its array for the
session's rules (it waits in the session's ``zombies``): an intermediate finds its session
through its node; a tensor the thread disposes inside a gradient call parks in the call's
session; and a session that outlives its call (a GradientTape after its ``with`` block, a
vjp pullback) pins the other tensors it recorded once, when it is detached. Nothing else is
kept: recording costs nothing per kernel for this.
"""
import itertools
import threading

from .buffer_pool import offer
from .after_fork import renew_after_fork


class State:
    """One thread's engine state: its scopes, recording gate, session and counters."""
    __slots__ = ("scope", "stack", "recording", "depth", "session", "in_backward",
                 "nt", "nb", "nbuf", "thread", "fpe", "lite", "quiet", "__weakref__")

    def __init__(self):
        self.scope = None          # the innermost open scope: the tensors created in it
        self.stack = []            # (name, list) of the open scopes, innermost last
        self.recording = False     # an op is recorded iff a gradient function's forward runs
        self.depth = 0
        self.session = None        # the Session that receives recorded nodes
        self.in_backward = 0       # > 0 while gradient rules run (may read parked tensors)
        self.fpe = None            # while in_backward: NumPy's errstate to put back
        self.lite = False          # a first-order backward runs: new tensors are LITE
        self.quiet = None          # float_errors.quiet_context() of this thread, once made
        # this thread's share of memory(): tensors, bytes, buffers it created minus those
        # it disposed or let the garbage collector free (a share may go negative)
        self.nt = self.nb = self.nbuf = 0
        self.thread = threading.current_thread()


_states = []               # every thread's State (a finished thread's is folded in _retired)
_retired = [0, 0, 0]
_states_lock = threading.Lock()
renew_after_fork(globals(), "_states_lock", threading.Lock)     # (flowgrad/after_fork.py)


class _Local(threading.local):
    def __init__(self):
        st = State()
        self.s = st
        with _states_lock:
            _states.append(st)


# ``LOCAL.s`` is this thread's State. The three owners above read it as a module global on
# their hot paths (one attribute load; ``state()`` is a call)
LOCAL = _Local()

# tensor ids, in creation order (``next_id()`` on a count is atomic under the GIL)
next_id = itertools.count().__next__


def state():
    """This thread's engine State."""
    return LOCAL.s


def memory_counts():
    """(tensors, buffers, bytes) over all threads."""
    nt = nb = nbuf = 0
    with _states_lock:
        for st in list(_states):
            if not st.thread.is_alive() and st is not LOCAL.s:
                # a finished thread writes no more: fold its share in
                _states.remove(st)
                _retired[0] += st.nt
                _retired[1] += st.nbuf
                _retired[2] += st.nb
                continue
            nt += st.nt
            nbuf += st.nbuf
            nb += st.nb
        return nt + _retired[0], nbuf + _retired[1], nb + _retired[2]


def total_bytes():
    """Bytes of live tensors over all threads (debug tools: peaks)."""
    return memory_counts()[2]


# ---------------------------------------------------------------- sessions and parking

class Session:
    """The nodes recorded between the outermost gradient call's start and its end, and the
    disposed tensors whose arrays its rules may still read (see the module doc)."""
    __slots__ = ("nodes", "alive", "zombies", "batched", "sources", "variables",
                 "__weakref__")

    def __init__(self):
        self.nodes = []
        self.alive = True
        self.batched = False       # holds nodes recorded inside tf.vmap (flowgrad.batching)
        self.zombies = []          # disposed tensors whose arrays this session's rules read
        # what its gradient calls differentiate with respect to (is_recorded): the ids of
        # their source tensors, and whether every trainable variable is one
        self.sources = set()
        self.variables = False

    def watch(self, tensors=(), variables=False):
        """Note the sources of a gradient call recording into this session: ``tensors``,
        and (``variables``) every trainable variable."""
        self.sources.update(id(t) for t in tensors)
        if variables:
            self.variables = True

    def detach(self):
        """The session outlives its gradient call: pin the inputs it recorded that are not
        its own intermediates (sources, variables, earlier tensors)."""
        for n in self.nodes:
            for t in n.inputs:
                m = t._node
                if (m is None or m.sess is not self) and t._pin is not self:
                    pin(t, self)

    def release(self):
        """Drop the recorded graph: nodes forget their inputs, parked arrays are freed
        (unless another live session needs them too). Safe to call again."""
        self.alive = False
        nodes, self.nodes = self.nodes, []
        for n in nodes:
            n.inputs = ()
            n.out = None
        zombies, self.zombies = self.zombies, []
        for t in zombies:
            if not _live_for(t, None):
                a = t._data
                t._data = None
                if a is not None:
                    offer(a)        # (the pool keeps only big arrays of wanted shapes)

    def __del__(self):
        try:
            self.release()
        except Exception:  # interpreter shutdown
            pass


def pin(t, sess):
    """Note that ``sess`` needs ``t`` (a second live session joins a tuple)."""
    p = t._pin
    if p is None or type(p) is Session and not p.alive:
        t._pin = sess
    elif type(p) is Session:
        t._pin = (p, sess)
    elif sess not in p:
        t._pin = tuple(s for s in p if s.alive) + (sess,)


def _live_for(t, st):
    """The live sessions that may read the disposed tensor ``t``."""
    live = []
    p = t._pin
    if p is not None:
        for s in ((p,) if type(p) is Session else p):
            if s.alive:
                live.append(s)
    n = t._node
    if n is not None and n.sess.alive and n.sess not in live:
        live.append(n.sess)
    if st is not None:
        s = st.session
        if s is not None and s.alive and s not in live:
            live.append(s)
    return live


def park(t, st):
    """Keep the disposed tensor ``t``'s array for the live sessions that may read it (True),
    or say that nobody needs it (False). ``st``: the disposing thread's State."""
    live = _live_for(t, st)
    for s in live:
        s.zombies.append(t)
    return bool(live)
