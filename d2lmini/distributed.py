"""Data parallelism with ``torch.distributed``: one process per device,
each with the whole model and its own share of every global batch.

``Trainer`` (``d2lmini.trainer``) uses this module and needs nothing
else: in a plain ``python`` process ``world()`` is ``(0, 1)`` and every
function here does nothing, so one code path trains on 1 to N
processes.  Under ``torchrun`` (which sets ``RANK``, ``WORLD_SIZE``,
``LOCAL_RANK`` and ``MASTER_ADDR``), ``init()`` joins the process
group: the ``gloo`` backend on CPUs, ``nccl`` with one CUDA device per
process (``cuda:LOCAL_RANK``).

What each process does at a training step (the trainer does it):

1. ``shard(batch)``: it keeps its rows of the global batch (the same
   global batch on every process, drawn from the same seed).  A process
   whose share is empty (a last batch of fewer rows than processes)
   computes on the batch's first row with weight zero, so that it still
   takes part in the gradient's all-reduce.
2. Its model's ``training_step`` gives the mean loss over its n_r
   tokens; one ``all_reduce`` sums the loss sums and the counts, so that
   every process knows the global count N = sum of n_r.
3. It back-propagates loss_r * n_r * W / N; ``DistributedDataParallel``
   averages the gradients over the W processes, which leaves the
   gradient of the global mean sum_r(loss_r * n_r) / N on every process:
   what one process computes on the whole batch.  (Averaging the
   per-process means instead weights a token of a process with few
   tokens more: another update whenever the counts differ.)
4. Clipping then sees the global gradient, and every process takes the
   same optimizer step.

``launch`` runs a module under ``torchrun`` in a subprocess, with a time
limit: what the tests, the lab notebook and ``make benchmark-ddp`` use.
"""

import datetime
import os
import signal
import subprocess
import sys

import torch
import torch.distributed as dist

from .utils import check_int

__all__ = ["all_reduce_sum", "barrier", "first_row", "init", "is_main",
           "launch", "rows", "shard", "under_torchrun", "world"]

# How long a collective waits for a peer before it fails (a peer that
# died is usually noticed at once; this bounds the rest).
TIMEOUT = datetime.timedelta(seconds=120)


def under_torchrun():
    """Whether this process was started by ``torchrun`` (or another
    launcher that sets ``WORLD_SIZE`` and ``RANK``)."""
    return "WORLD_SIZE" in os.environ and "RANK" in os.environ


def init(device="auto"):
    """Join the process group when started by ``torchrun``; returns the
    device this process trains on.

    ``device='auto'``: ``cuda:LOCAL_RANK`` with NCCL when CUDA is
    there, else the CPU with gloo (``'cpu'`` forces the CPU).  Outside
    ``torchrun`` it joins nothing and returns ``'auto'``'s single
    device (``torch.device('cuda')``, ``'mps'`` or ``'cpu'``).  Calling
    it again returns the same device."""
    if device not in ("auto", "cpu", "cuda"):
        raise ValueError(f"device is 'auto', 'cpu' or 'cuda', got "
                         f"{device!r}")
    use_cuda = torch.cuda.is_available() and device != "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise ValueError("device='cuda' but this machine has no CUDA "
                         "device; use 'auto' or 'cpu'")
    if not under_torchrun():
        if use_cuda:
            return torch.device("cuda")
        if device == "auto" and torch.backends.mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    local = int(os.environ.get("LOCAL_RANK", "0"))
    if use_cuda:
        if local >= torch.cuda.device_count():
            raise RuntimeError(
                f"process {local} of this node has no GPU: the node has "
                f"{torch.cuda.device_count()}; start at most that many "
                f"processes per node (torchrun --nproc-per-node)")
        torch.cuda.set_device(local)
    if not dist.is_initialized():
        dist.init_process_group("nccl" if use_cuda else "gloo",
                                timeout=TIMEOUT)
    return torch.device("cuda", local) if use_cuda else torch.device("cpu")


def world():
    """``(rank, world_size)`` of this process: ``(0, 1)`` outside a
    process group."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def is_main():
    """Whether this process is rank 0 (the one that writes files)."""
    return world()[0] == 0


def barrier():
    """Wait until every process gets here (nothing to wait for alone)."""
    if world()[1] > 1:
        dist.barrier()


def all_reduce_sum(tensor):
    """Sum ``tensor`` over the processes, in place, and return it
    (unchanged alone)."""
    if world()[1] > 1:
        dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
    return tensor


def _first_dim(batch):
    tensors = [batch] if torch.is_tensor(batch) else \
        [t for t in batch if torch.is_tensor(t)]
    sizes = {len(t) for t in tensors if t.dim()}
    if len(sizes) != 1:
        raise ValueError(f"a batch to share between processes must hold "
                         f"tensors with one first dimension (the batch), "
                         f"got first dimensions {sorted(sizes)}")
    return sizes.pop()


def shard(batch, rank=None, world_size=None):
    """This process's rows of a global batch: the ``rank``-th of
    ``world_size`` nearly equal, contiguous parts of every tensor's first
    dimension (``torch.tensor_split``; the first ``B % W`` parts have a
    row more, and a batch of fewer rows than processes leaves the last
    parts empty).  Non-tensors are kept; alone, the batch is returned as
    it is."""
    if rank is None or world_size is None:
        rank, world_size = world()
    check_int("world_size", world_size)
    if world_size == 1:
        return batch
    _first_dim(batch)
    return _rows(batch, lambda t: torch.tensor_split(t, world_size)[rank])


def rows(batch):
    """The number of rows (the first dimension) of a batch's tensors."""
    return _first_dim(batch)


def first_row(batch):
    """The batch's first row, as a batch of one (what a process with an
    empty share computes on, with weight zero)."""
    return _rows(batch, lambda t: t[:1])


def _rows(batch, cut):
    def part(t):
        return cut(t) if torch.is_tensor(t) and t.dim() else t

    if torch.is_tensor(batch):
        return part(batch)
    items = [part(t) for t in batch]
    if hasattr(batch, "_fields"):  # a namedtuple
        return type(batch)(*items)
    return type(batch)(items)


def launch(args, nproc=2, timeout=300, env=None, threads=1):
    """Run ``python -m torch.distributed.run --nproc-per-node nproc
    --standalone <args>`` and return its ``CompletedProcess`` (stdout
    and stderr together, as text).

    ``args`` is a list such as ``["-m", "d2lmini.train", "lm", ...]``.
    Each process gets ``threads`` intra-op threads (``OMP_NUM_THREADS``:
    two processes of one thread each share two cores).  A job that runs
    past ``timeout`` seconds is killed and raises
    ``subprocess.TimeoutExpired``, so a hang ends; a job that fails
    returns its non-zero ``returncode`` and its output (torchrun stops
    every process when one fails)."""
    check_int("nproc", nproc)
    check_int("threads", threads)
    command = [sys.executable, "-m", "torch.distributed.run",
               "--standalone", f"--nproc-per-node={nproc}",
               "--monitor-interval=0.5", *args]
    full_env = {**os.environ, "OMP_NUM_THREADS": str(threads),
                "PYTHONUNBUFFERED": "1", **(env or {})}
    # A session of its own, so that a timeout ends torchrun's workers
    # too, not only torchrun.
    with subprocess.Popen(command, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True,
                          env=full_env, start_new_session=True) as job:
        try:
            output, _ = job.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(job.pid, signal.SIGKILL)
            output, _ = job.communicate()
            raise subprocess.TimeoutExpired(command, timeout,
                                            output) from None
    return subprocess.CompletedProcess(command, job.returncode, output)
