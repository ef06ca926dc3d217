"""Small helpers every module shares: seeding, argument checks, safe writes,
and what a measurement records of the machine that made it.

This module imports nothing else of ``d2lmini``, so any module may use it.
"""

import contextlib
import datetime
import os
import platform
import random
import shlex
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch

__all__ = ["atomic_write", "check_int", "check_shape", "keep_random_state",
           "machine", "set_seed"]


def set_seed(seed):
    """Seed Python's, NumPy's and PyTorch's global random generators.

    The one seeding rule of ``d2lmini``: the global generators (seeded
    here) draw initial weights and dropout masks; ``MTFraEng(seed=)``
    keeps a generator of its own for the split and the batch order, so
    that the data does not depend on what else used randomness.
    """
    check_int("seed", seed, 0)
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)  # also seeds every CUDA device


@contextlib.contextmanager
def keep_random_state(device_type=None):
    """Run the ``with`` block, then put Python's, NumPy's and PyTorch's
    global generators back as they were when it began, so that what the
    block draws or seeds changes no later draw (such as the dropout
    masks of a training run that the block watches).

    Args:
        device_type: whose generator to keep besides the CPU's:
            ``'cuda'`` (every CUDA device's), ``'mps'`` (the Apple
            GPU's) or ``'cpu'`` (none); None: the first of these that
            this machine has, as ``Trainer(device='auto')`` picks.
    """
    if device_type is None:
        device_type = ("cuda" if torch.cuda.is_available() else "mps"
                       if torch.backends.mps.is_available() else "cpu")
    if device_type == "cuda":
        devices = list(range(torch.cuda.device_count()))
    elif device_type == "mps":
        devices = [0]  # one Apple GPU, one generator
    else:
        devices = []
    python, numpy = random.getstate(), np.random.get_state()
    with torch.random.fork_rng(
            devices=devices,
            device_type="mps" if device_type == "mps" else "cuda"):
        try:
            yield
        finally:
            random.setstate(python)
            np.random.set_state(numpy)


def check_shape(tensor, shape):
    """Raise ``ValueError`` unless ``tensor.shape`` equals ``shape``."""
    if tuple(tensor.shape) != tuple(shape):
        raise ValueError(f"expected shape {tuple(shape)}, "
                         f"got {tuple(tensor.shape)}")


def check_int(name, value, minimum=1, *, none_ok=False):
    """Raise ``ValueError`` unless ``value`` is an int >= ``minimum``.

    ``bool`` is refused (``True`` is an int to Python, not a count);
    ``none_ok`` also accepts None.  Returns ``value``.
    """
    if value is None and none_ok:
        return value
    if isinstance(value, bool) or not isinstance(value, int) \
            or value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}"
                         f"{' or None' if none_ok else ''}, got {value!r}")
    return value


@contextlib.contextmanager
def atomic_write(path, prefix=None, mode=0o644):
    """Write ``path`` through a temporary file beside it, then rename.

    Yields the open binary file; its ``name`` is the temporary path, for
    checks of the written bytes inside the block (``f.flush()`` first).
    Only when the block ends without an error is the file renamed to
    ``path``, so a reader never sees a half-written file; on an error the
    temporary file is removed.  Missing folders are created.

    >>> with atomic_write(tmp / "x.bin") as f:  # doctest: +SKIP
    ...     f.write(b"data")
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".part",
                               prefix=prefix or f".{path.name}.")
    os.close(fd)
    try:
        with open(tmp, "wb") as f:
            yield f
        os.chmod(tmp, mode)  # mkstemp makes the file private (0o600)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def _cpu_model():
    """The CPU's model name, from /proc/cpuinfo where there is one."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("model name", "Hardware")):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine(command=None):
    """What a benchmark result must record of the run that made it: the
    command, the date, the CPU, the thread count and the torch build.

    Args:
        command: the command line; defaults to this process's.
    """
    if command is None:
        command = " ".join(["python"] + [shlex.quote(a) for a in sys.argv])
    device = "cuda" if torch.cuda.is_available() else "cpu"
    return {"command": command,
            "date": datetime.date.today().isoformat(),
            "cpu": f"{_cpu_model()} ({platform.machine()})",
            "threads": torch.get_num_threads(),
            "torch": torch.__version__,
            "device": device}
