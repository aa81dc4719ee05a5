"""The recording gate (is this thread running a gradient function's forward pass, or its
rules?) and the Session that receives the nodes a gradient call records. Split from
engine.py, which re-exports every name: the engine's kernel entry reads the same per-thread
State (``st.recording``, ``st.session``) directly.

Interrupt safety: every function here only stores values computed beforehand, so calling it
again after a Ctrl-C (as the ``finally`` blocks of the gradient calls do) is harmless.
"""
from . import engine as E
from .buffer_pool import offer


class Session:
    """The nodes recorded between the outermost gradient call's start and its end.

    A recorded tensor disposed while its session lives keeps its array for the session's
    rules (it is "parked" in ``zombies``): an intermediate finds its session through its
    node; a tensor the thread disposes inside a gradient call parks in the call's session;
    and a session that outlives its call (a GradientTape after its ``with`` block, a vjp
    pullback) pins the other tensors it recorded once, when it is detached. Nothing else is
    kept: recording costs nothing per kernel for this.
    """
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
                    _pin(t, self)

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
                if a is not None and a.size >= E.POOL_MIN:
                    offer(a)

    def __del__(self):
        try:
            self.release()
        except Exception:  # interpreter shutdown
            pass


def _pin(t, sess):
    """Note that ``sess`` needs ``t`` (a second live session joins a tuple)."""
    p = t._pin
    if p is None or type(p) is Session and not p.alive:
        t._pin = sess
    elif type(p) is Session:
        t._pin = (p, sess)
    elif sess not in p:
        t._pin = tuple(s for s in p if s.alive) + (sess,)


def _live_for(t, st):
    """The live sessions that may read the disposed tensor ``t`` (see Session)."""
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


def _park(t, st):
    """Keep a disposed tensor's array for the live sessions that may read it (True), or
    say that nobody needs it (False)."""
    live = _live_for(t, st)
    for s in live:
        s.zombies.append(t)
    return bool(live)


# ---------------------------------------------------------------- recording gate
#
# A gradient call notes ``recording_level()`` before it opens anything and calls
# ``unwind_recording(level)`` in its ``finally`` (twice if the first is interrupted: see
# tidy): whatever an interrupt skipped, the gate and the session are then exactly as
# before the call.

def recording_level():
    """This thread's gate as it is now: pass it to unwind_recording in a ``finally``."""
    st = E._tls.s
    return st.depth, st.session


def begin_recording():
    """Enter a gradient function's forward pass. Returns the session it records into and
    whether this call opened it (and so must release it)."""
    st = E._tls.s
    owner = st.depth == 0
    sess = Session() if owner else st.session
    st.session = sess
    st.depth += 1
    st.recording = True
    return sess, owner


def end_recording():
    st = E._tls.s
    if st.depth > 0:
        st.depth -= 1
    st.recording = st.depth > 0


def unwind_recording(level, keep=None):
    """Bring this thread's gate back to ``level`` (from recording_level() before a gradient
    call) and release a session that call opened, unless it is ``keep`` (a tape or a vjp
    pullback that outlives the call). Idempotent: safe after any interrupt."""
    depth, prev = level
    st = E._tls.s
    st.depth = depth
    st.recording = depth > 0
    cur = st.session
    if cur is not prev:
        st.session = prev
        if depth == 0 and cur is not None and cur is not keep:
            cur.release()


def pause_recording():
    """Leave one level of recording (GradientTape.stop_recording); returns what
    resume_recording needs."""
    level = recording_level()
    end_recording()
    return level


def resume_recording(level):
    """Undo pause_recording: the gate and session as they were (a session opened and
    released meanwhile is forgotten)."""
    st = E._tls.s
    st.depth, st.session = level
    st.recording = st.depth > 0


def is_recording():
    """True while this thread runs a gradient function's forward pass (ops are recorded)."""
    return E._tls.s.recording


def is_recorded(t):
    """True when this thread runs a gradient function's forward pass and ``t`` takes part
    in it: a source of the gradient (the tensors it is taken with respect to, the trainable
    variables for variable_grads, minimize and a tape that watches what it meets), or the
    result of an op recorded into a live session. Tensors made inside f from constants,
    and tensors from outside that f only reads, are not."""
    st = E.state()
    if not st.recording:
        return False
    n = t._node
    if n is not None and n.sess.alive:
        return True
    sess = st.session
    return id(t) in sess.sources or (sess.variables and getattr(t, "trainable", False))


def current_session():
    st = E._tls.s
    return st.session if st.depth > 0 else None


def in_backward():
    """True while this thread runs gradient rules."""
    return E._tls.s.in_backward > 0


def backward_level():
    """This thread's rule-running depth: pass it to exit_backward in a ``finally``."""
    return E._tls.s.in_backward


def enter_backward():
    """Enter a backward pass; the outermost one silences NumPy's floating-point warnings
    (kernels compute -Inf/NaN as TF.js does) until exit_backward brings the depth to 0."""
    st = E._tls.s
    if st.in_backward == 0 and st.fpe is None:
        st.fpe = E.fpe_saved()
        E._fpe_put(E._QUIET)
    st.in_backward += 1


def exit_backward(level=None):
    """Leave a backward pass: back to ``level`` (from backward_level()), or one down."""
    st = E._tls.s
    if level is not None:
        st.in_backward = level
    elif st.in_backward > 0:
        st.in_backward -= 1
    if st.in_backward == 0 and st.fpe is not None:
        E._fpe_put(st.fpe)            # (first: repeated after an interrupt, it is harmless)
        st.fpe = None
