"""A Ctrl-C that lands in a tensor's finalizer reaches the user's code (CPython swallows an
exception raised in ``__del__``: ~1 in 40 Ctrl-Cs sent to a training loop were lost), and
the tensor it was freeing is un-counted all the same. Each case runs in a fresh interpreter:
pytest installs its own sys.unraisablehook around every test."""
import subprocess
import sys

# The interrupt is raised where CPython raises a real one: on entering tensor_del (a trace
# function's 'call' event), before its first line.
PRELUDE = """
import signal, sys, time
import flowgrad as tf
from flowgrad import engine as E

def interrupt_on_entry(code):
    def tracer(frame, event, arg):
        if event == "call" and frame.f_code is code:
            sys.settrace(None)
            raise KeyboardInterrupt
    sys.settrace(tracer)

def spin(seconds=2.0):
    t0 = time.time()
    while time.time() < t0 + seconds:
        pass
    return "not interrupted"
"""

TENSOR = PRELUDE + """
base = tf.memory()["num_tensors"]
t = tf.tensor([1.0, 2.0]) * 2
interrupt_on_entry(E.tensor_del.__code__)
try:
    del t
    print(spin())
except KeyboardInterrupt:
    print("interrupted")
print(tf.memory()["num_tensors"] - base)
"""

# a pullback's finalizer releases its recording (the tensors it kept counted)
PULLBACK = PRELUDE + """
base = tf.memory()["num_tensors"]
x = tf.tensor([1.0, 2.0])
y, pullback = tf.vjp(lambda t: (t * t).exp().sum(), x)
y.dispose()
held = tf.memory()["num_tensors"] - base
interrupt_on_entry(type(pullback).__del__.__code__)
try:
    del pullback
    print(spin())
except KeyboardInterrupt:
    print("interrupted")
print(held, tf.memory()["num_tensors"] - base)
"""

USER_HANDLER = PRELUDE + """
got = []
signal.signal(signal.SIGINT, lambda s, f: got.append(s))
t = tf.tensor([1.0]) + 1
interrupt_on_entry(E.tensor_del.__code__)
del t
spin(0.3)
print(got == [signal.SIGINT])
"""

# a KeyboardInterrupt in another thread's finalizer is no Ctrl-C (only the main thread
# gets those): Python's behaviour, nothing sent to the main thread
OTHER_THREAD = PRELUDE + """
import threading
def work():
    t = tf.tensor([1.0]) + 1
    interrupt_on_entry(E.tensor_del.__code__)
    del t
th = threading.Thread(target=work)
th.start(); th.join()
try:
    print(spin(0.3))
except KeyboardInterrupt:
    print("interrupted")
"""

NOT_OURS = PRELUDE + """
class Mine:
    def __del__(self):
        pass
m = Mine()
interrupt_on_entry(Mine.__del__.__code__)
try:
    del m
    print(spin(0.3))
except KeyboardInterrupt:
    print("interrupted")
"""


def run(code):
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       check=False, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout.split(), r.stderr


def test_an_interrupt_on_entering_tensor_del_reaches_the_user_and_the_count_is_right():
    out, err = run(TENSOR)
    assert out == ["interrupted", "0"], (out, err)
    assert "Exception ignored" not in err


def test_an_interrupted_pullback_finalizer_still_releases_its_recording():
    out, err = run(PULLBACK)
    assert out == ["interrupted", "3", "1"], (out, err)     # (x alone is left)


def test_the_interrupt_goes_to_the_sigint_handler_in_force():
    out, err = run(USER_HANDLER)
    assert out == ["True"], (out, err)


def test_another_threads_finalizer_keeps_pythons_behaviour():
    out, err = run(OTHER_THREAD)
    assert out == ["not", "interrupted"] and "Exception ignored in" in err, (out, err)


def test_other_finalizers_keep_pythons_behaviour():
    # (not flowgrad's to change: printed and swallowed, as without flowgrad)
    out, err = run(NOT_OURS)
    assert out == ["not", "interrupted"] and "Exception ignored in" in err, (out, err)
