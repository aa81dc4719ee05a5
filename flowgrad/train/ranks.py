"""Which rank of a data-parallel job this process is, for what train/ lets one rank do
alone: rank 0 writes a checkpoint (the others wait until the file is whole) and rank 0 alone
shows a progress bar.

Why it lives here: tf.distributed sits above train (its optimizer wraps train's), so train
must not import it, yet checkpoints and progress bars must know the rank. So the question
is answered in train's layer, and ``tf.distributed.init()`` hands over the job it joined
(``attach``) when it runs: an ordinary call at run time, never a registration made by
importing a module, so no import ties train to tf.distributed and a program that never
calls ``init()`` never touches it. Before ``init()``, a process that an MPI launcher started
already knows its rank from the launcher's environment variables (read here, the one place
that reads them), so ranks 1..N-1 show no bar even when the script makes one first.
"""
import os

# environment variables MPI launchers set in every rank (Open MPI, PMIx, MPICH/Intel MPI
# Hydra, MVAPICH)
_RANK_VARS = ("OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "MV2_COMM_WORLD_RANK")
_SIZE_VARS = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "MV2_COMM_WORLD_SIZE")

_joined = None          # tf.distributed's query, once init() ran (see attach)
_barrier = None


def _env_int(names):
    for n in names:
        v = os.environ.get(n)
        if v is not None and v.strip().lstrip("-").isdigit():
            return int(v)
    return None


def launcher_rank():
    """The rank an MPI launcher (``mpiexec``, ``srun --mpi``, an MPIJob) gave this process in
    its environment variables; None when no MPI launcher started it."""
    return _env_int(_RANK_VARS)


def launcher_size():
    """The number of ranks the MPI launcher started, from its environment variables; None
    when it does not say (or no MPI launcher started this process)."""
    return _env_int(_SIZE_VARS)


def attach(joined, barrier):
    """Called by ``tf.distributed.init()``: ``joined()`` returns ``(rank, size)`` of the job
    while this process is in one (None otherwise), asked at every call so the answer is
    always the job's current state; ``barrier()`` waits for every rank."""
    global _joined, _barrier
    _joined, _barrier = joined, barrier


def _job():
    return _joined() if _joined is not None else None


def rank_and_size():
    """``(rank, size)`` of the job this process joined with ``tf.distributed.init()``;
    ``(0, 1)`` before that, or without tf.distributed."""
    job = _job()
    return (0, 1) if job is None else job


def is_root():
    """True on rank 0, the rank that writes files and shows progress; before
    ``tf.distributed.init()``, True unless a launcher (MPI, or Slurm's ``SLURM_PROCID``) gave
    this process another rank. Cheap, and it never starts MPI."""
    job = _job()
    if job is not None:
        return job[0] == 0
    r = launcher_rank()
    if r is None:
        r = _env_int(("SLURM_PROCID",))
    return not r


def barrier():
    """Wait until every rank of the job gets here; nothing outside a job of several ranks."""
    job = _job()
    if job is not None and job[1] > 1:
        _barrier()
