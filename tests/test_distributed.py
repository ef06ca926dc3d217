"""Data-parallel training: two gloo processes under ``torchrun`` end
where one process ends on the same global batches.

The jobs are ``tests/ddp_worker.py`` (a tiny language model and a tiny
Transformer translator on made-up data, dropout 0), run once as a
plain process and once under ``torchrun --nproc-per-node 2`` with one
thread per process.  The two-process tests are marked ``slow``: a
plain ``pytest`` leaves them out, ``make unit`` runs them.

Tolerances: the losses of every step agree to 1e-6 (relative), every
weight to 1e-5, except the attention's key biases: in exact arithmetic
their gradient is zero (adding the same number to every score of a
query changes no softmax), so each run's update of them is Adam
dividing rounding noise by its own size, and two runs' noises differ.
"""

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from d2lmini import distributed

WORKER = str(Path(__file__).with_name("ddp_worker.py"))
# What a process of a per-process-mean job changes, against one
# process, at the least (measured: 1e-3 to 5e-2); an equivalent job
# stays below 1e-5.
NAIVE_AT_LEAST = 1e-4


def one_process(model, out, *extra):
    subprocess.run([sys.executable, WORKER, model, str(out), *extra],
                   check=True, capture_output=True, text=True,
                   timeout=300)
    return torch.load(out)


def two_processes(model, out, *extra, check=True):
    job = distributed.launch([WORKER, model, str(out), *extra], nproc=2,
                             timeout=300)
    if check:
        assert job.returncode == 0, job.stdout[-3000:]
        return torch.load(out)
    return job


def weight_gap(a, b):
    """The largest difference of the two runs' weights, key biases left
    out (see the module docstring)."""
    return max((a["params"][k] - b["params"][k]).abs().max().item()
               for k in a["params"] if not k.endswith("W_k.bias"))


@pytest.mark.slow
@pytest.mark.parametrize("model", ["lm", "transformer"])
def test_two_processes_compute_what_one_computes(model, tmp_path):
    one = one_process(model, tmp_path / "one.pt")
    two = two_processes(model, tmp_path / "two.pt")
    assert (one["world"], two["world"]) == (1, 2)
    assert one["tokens"] == two["tokens"] > 0
    assert two["losses"] == pytest.approx(one["losses"], rel=1e-6)
    assert weight_gap(one, two) < 1e-5
    # A per-process mean (each process's loss counted alike, whatever
    # its number of tokens) is another update: the check can fail.
    naive = two_processes(model, tmp_path / "naive.pt", "--naive")
    assert weight_gap(one, naive) > NAIVE_AT_LEAST


@pytest.mark.slow
def test_a_batch_smaller_than_the_processes_counts_once(tmp_path):
    """An epoch ends with a batch of one sentence: process 1's share is
    empty, it computes on that row with weight zero, and the two
    processes still take one process's steps."""
    one = one_process("lm-one-row", tmp_path / "one.pt", "--steps", "14")
    two = two_processes("lm-one-row", tmp_path / "two.pt", "--steps", "14")
    assert one["tokens"] == two["tokens"]
    assert two["losses"] == pytest.approx(one["losses"], rel=1e-6)
    assert weight_gap(one, two) < 1e-5


@pytest.mark.slow
def test_one_process_writes_the_checkpoint_the_others_load(tmp_path):
    done = two_processes("lm", tmp_path / "out.pt", "--save",
                         str(tmp_path / "model.pt"))
    assert done["wrote"] == [True, False]
    saved = torch.load(tmp_path / "model.pt")
    assert saved["extra"] == {"note": "test"}
    assert all(torch.equal(saved["state_dict"][k], v)
               for k, v in done["params"].items())
    assert [p.name for p in tmp_path.iterdir() if p.suffix == ".tmp"] == []


@pytest.mark.slow
def test_a_process_that_raises_stops_the_job_with_its_error(tmp_path):
    job = two_processes("lm", tmp_path / "out.pt", "--fail-rank", "1",
                        check=False)
    assert job.returncode != 0
    assert "planned failure of process 1 at step 2" in job.stdout
    assert not (tmp_path / "out.pt").exists()


def test_shard_splits_the_rows_and_keeps_the_rest():
    X, y = torch.arange(10).reshape(5, 2), torch.arange(5)
    parts = [distributed.shard((X, y, "tag"), r, 2) for r in range(2)]
    assert [p[1].tolist() for p in parts] == [[0, 1, 2], [3, 4]]
    assert torch.equal(torch.cat([p[0] for p in parts]), X)
    assert parts[1][2] == "tag"
    assert distributed.shard((X, y), 0, 1) == (X, y)
    # fewer rows than processes: the last shares are empty
    assert [distributed.rows(distributed.shard((y[:1],), r, 3))
            for r in range(3)] == [1, 0, 0]
    with pytest.raises(ValueError, match=r"one first dimension.*\[3, 5\]"):
        distributed.shard((X[:3], y), 0, 2)


def test_alone_nothing_is_reduced_or_awaited():
    assert distributed.world() == (0, 1) and distributed.is_main()
    t = torch.tensor([1.0, 2.0])
    assert distributed.all_reduce_sum(t) is t and t.tolist() == [1.0, 2.0]
    distributed.barrier()
    assert distributed.init("cpu") == torch.device("cpu")
    with pytest.raises(ValueError, match="'auto', 'cpu' or 'cuda'"):
        distributed.init("tpu")


def test_launch_ends_a_job_that_runs_past_its_time(tmp_path):
    script = tmp_path / "sleep.py"
    script.write_text("import time\ntime.sleep(60)\n")
    with pytest.raises(subprocess.TimeoutExpired):
        distributed.launch([str(script)], nproc=1, timeout=3)


def test_the_command_line_refuses_bad_arguments(capsys):
    from d2lmini import train

    args = train.parse(["lm", "--size", "medium", "--max-steps", "5"])
    assert (args.model, args.size, args.max_steps) == ("lm", "medium", 5)
    for bad, word in ((["lm", "--max-steps", "0"], "at least 1"),
                      (["lm", "--lr", "-1"], "positive"),
                      (["lm", "--size", "huge"], "invalid choice"),
                      (["gpt"], "invalid choice")):
        with pytest.raises(SystemExit):
            train.parse(bad)
        assert word in capsys.readouterr().err
