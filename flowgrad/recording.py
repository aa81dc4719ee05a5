"""The recording gate: is this thread running a gradient function's forward pass (ops are
recorded, into a :class:`~flowgrad.thread_state.Session`), or its rules (a backward pass)?
The engine's kernel entry reads the same per-thread State (``st.recording``,
``st.session``) directly; everything else asks here.

Interrupt safety: every function here only stores values computed beforehand, so calling it
again after a Ctrl-C (as the ``finally`` blocks of the gradient calls do) is harmless.
"""
from .float_errors import QUIET, fpe_put, fpe_saved
from .thread_state import LOCAL, Session


# ---------------------------------------------------------------- recording gate
#
# A gradient call notes ``recording_level()`` before it opens anything and calls
# ``unwind_recording(level)`` in its ``finally`` (twice if the first is interrupted: see
# tidy): whatever an interrupt skipped, the gate and the session are then exactly as
# before the call.

def recording_level():
    """This thread's gate as it is now: pass it to unwind_recording in a ``finally``."""
    st = LOCAL.s
    return st.depth, st.session


def begin_recording():
    """Enter a gradient function's forward pass. Returns the session it records into and
    whether this call opened it (and so must release it)."""
    st = LOCAL.s
    owner = st.depth == 0
    sess = Session() if owner else st.session
    st.session = sess
    st.depth += 1
    st.recording = True
    return sess, owner


def end_recording():
    st = LOCAL.s
    if st.depth > 0:
        st.depth -= 1
    st.recording = st.depth > 0


def unwind_recording(level, keep=None):
    """Bring this thread's gate back to ``level`` (from recording_level() before a gradient
    call) and release a session that call opened, unless it is ``keep`` (a tape or a vjp
    pullback that outlives the call). Idempotent: safe after any interrupt."""
    depth, prev = level
    st = LOCAL.s
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
    st = LOCAL.s
    st.depth, st.session = level
    st.recording = st.depth > 0


def is_lite():
    """Whether the tensors this thread creates are LITE (engine.LITE: a first-order backward
    pass runs whose temporaries only flowgrad's rules see): note it before set_lite, and
    put it back in a ``finally``."""
    return LOCAL.s.lite


def set_lite(on):
    """Make the tensors this thread creates from now on LITE (``on``) or counted as usual."""
    LOCAL.s.lite = on


def is_recording():
    """True while this thread runs a gradient function's forward pass (ops are recorded)."""
    return LOCAL.s.recording


def is_recorded(t):
    """True when this thread runs a gradient function's forward pass and ``t`` takes part
    in it: a source of the gradient (the tensors it is taken with respect to, the trainable
    variables for variable_grads, minimize and a tape that watches what it meets), or the
    result of an op recorded into a live session. Tensors made inside f from constants,
    and tensors from outside that f only reads, are not."""
    st = LOCAL.s
    if not st.recording:
        return False
    n = t._node
    if n is not None and n.sess.alive:
        return True
    sess = st.session
    return id(t) in sess.sources or (sess.variables and getattr(t, "trainable", False))


def current_session():
    st = LOCAL.s
    return st.session if st.depth > 0 else None


def in_backward():
    """True while this thread runs gradient rules."""
    return LOCAL.s.in_backward > 0


def backward_level():
    """This thread's rule-running depth: pass it to exit_backward in a ``finally``."""
    return LOCAL.s.in_backward


def enter_backward():
    """Enter a backward pass; the outermost one silences NumPy's floating-point warnings
    (kernels compute -Inf/NaN as TF.js does) until exit_backward brings the depth to 0."""
    st = LOCAL.s
    if st.in_backward == 0 and st.fpe is None:
        st.fpe = fpe_saved()
        fpe_put(QUIET)
    st.in_backward += 1


def exit_backward(level=None, lite=False):
    """Leave a backward pass: back to ``level`` (from backward_level()), or one down, and
    LITE tensors back to ``lite`` (from is_lite() before the pass). Idempotent with a level:
    a ``finally`` repeats it after an interrupt."""
    st = LOCAL.s
    st.lite = lite
    if level is not None:
        st.in_backward = level
    elif st.in_backward > 0:
        st.in_backward -= 1
    if st.in_backward == 0 and st.fpe is not None:
        fpe_put(st.fpe)            # (first: repeated after an interrupt, it is harmless)
        st.fpe = None
