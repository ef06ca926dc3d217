"""Tests of d2lmini.trainer on tiny synthetic models (each in seconds)."""

import math

import numpy as np
import pytest
import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

from d2lmini.trainer import Every, History, Trainer


class TrainOnlyRegression(nn.Module):
    """A linear regression with dropout, without ``validation_step``."""

    def __init__(self, lr=0.05, dropout=0.0):
        super().__init__()
        self.net = nn.Sequential(nn.Dropout(dropout), nn.Linear(3, 1))
        self.lr, self.log = lr, []

    def forward(self, X):
        return self.net(X).squeeze(-1)  # (B,)

    def training_step(self, batch):
        X, y = batch[:2]
        self.log.append(("train", self.training, torch.is_grad_enabled()))
        return F.mse_loss(self(X), y), len(y)

    def configure_optimizers(self):
        self.log.append(("optim",))
        return torch.optim.Adam(self.parameters(), lr=self.lr)


class Regression(TrainOnlyRegression):
    """The same with a ``validation_step``: the full trainer contract."""

    def validation_step(self, batch):
        X, y = batch[:2]
        self.log.append(("val", self.training, torch.is_grad_enabled()))
        return F.mse_loss(self(X), y), len(y)


class Data:
    """64 noisy examples of y = x @ w; 8 batches of 8 per epoch."""

    def __init__(self, val=True, shuffle=True):
        g = torch.Generator().manual_seed(0)
        self.X = torch.randn(64, 3, generator=g)
        self.y = self.X @ torch.tensor([1.0, -2.0, 0.5]) + 0.3
        self.val, self.shuffle = val, shuffle

    def train_dataloader(self):
        return DataLoader(TensorDataset(self.X, self.y), batch_size=8,
                          shuffle=self.shuffle)

    def val_dataloader(self):
        if self.val:
            return DataLoader(TensorDataset(self.X, self.y), batch_size=16)
        return None


def fit(model=None, data=None, **kwargs):
    kwargs.setdefault("progress", False)
    trainer = Trainer(**kwargs)
    history = trainer.fit(model or Regression(), data or Data())
    return trainer, history


def test_loss_decreases_and_history_lengths():
    torch.manual_seed(0)
    trainer, h = fit(max_epochs=4, gradient_clip_val=1.0, seed=0)
    assert isinstance(h, History) and trainer.history is h
    assert len(h.train_loss) == len(h.val_loss) == len(h.epoch_time) == 4
    assert h.train_loss[-1] < h.train_loss[0] / 4
    assert h.val_loss[-1] < h.val_loss[0] / 4
    assert (h.num_steps, h.num_tokens, h.epochs) == (32, 4 * 64, 4.0)
    assert [s for s, _ in h.steps] == list(range(1, 33))
    assert [s for s, _ in h.val_steps] == [8, 16, 24, 32]
    assert h.tokens_per_second == pytest.approx(h.num_tokens / h.train_time)
    # the epoch loss is the token-weighted mean of its batch losses
    first = [loss for _, loss in h.steps[:8]]
    assert h.train_loss[0] == pytest.approx(sum(first) / 8)
    text = repr(h)
    assert "32 steps" in text and f"{h.train_loss[0]:.4f}" in text


def test_train_and_eval_modes_and_no_grad():
    model = Regression()
    fit(model, max_epochs=2, val_every_n_steps=3)
    assert model.log[0] == ("optim",)
    assert model.log.count(("optim",)) == 1
    # training resumes in train mode (dropout on) after a mid-epoch check
    assert set(model.log[1:]) == {("train", True, True),
                                  ("val", False, False)}
    assert not model.training  # left ready for prediction


def test_validation_falls_back_to_training_step():
    model = TrainOnlyRegression()
    _, h = fit(model, max_epochs=1)
    assert len(h.val_loss) == 1
    assert ("train", False, False) in model.log  # run as validation


@pytest.mark.parametrize("every, expected", [
    (3, [3, 6, 8, 9, 12, 15, 16]), (4, [4, 8, 12, 16])])
def test_val_every_n_steps(every, expected):
    _, h = fit(max_epochs=2, val_every_n_steps=every)
    assert [s for s, _ in h.val_steps] == expected  # no duplicate at 8, 16
    assert h.val_loss == [dict(h.val_steps)[8], dict(h.val_steps)[16]]


class TrainOnlyData:
    def train_dataloader(self):
        return Data().train_dataloader()


@pytest.mark.parametrize("data", [Data(val=False), TrainOnlyData()])
def test_without_validation(data):
    _, h = fit(data=data, max_epochs=2, val_every_n_steps=3)
    assert h.val_loss == [] and h.val_steps == []
    assert len(h.train_loss) == 2


def huge_gradient_model(x):
    """loss = 1e6 * (w . x) + 1e6 * b, so the gradient is 1e6 * (x, 1)."""

    class Huge(nn.Module):
        def __init__(self):
            super().__init__()
            self.w, self.b = nn.Parameter(torch.zeros(4)), nn.Parameter(
                torch.zeros(()))

        def training_step(self, batch):
            return 1e6 * (self.w @ x + self.b)

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.0)

    return Huge()


def grads(model):
    return torch.cat([p.grad.reshape(-1) for p in model.parameters()])


@pytest.mark.parametrize("clip", [0.5, 3.0])
def test_clipping_scales_the_global_norm_to_the_threshold(clip):
    x = torch.tensor([3.0, -4.0, 12.0, 0.0])
    model = huge_gradient_model(x)
    data = type("D", (), {"train_dataloader": lambda self: [(x,)]})()
    fit(model, data, max_epochs=1, gradient_clip_val=clip)
    g = grads(model)  # the gradient left by the last (only) step
    raw = 1e6 * torch.cat([x, torch.ones(1)])
    # the *global* norm over both parameters meets the threshold and the
    # direction is kept (per-parameter clipping would exceed the norm)
    assert g.norm().item() <= clip + 1e-5
    assert g.norm().item() == pytest.approx(clip, rel=1e-5)
    torch.testing.assert_close(g / g.norm(), raw / raw.norm())


@pytest.mark.parametrize("clip", [0, 1e9])
def test_no_clipping_below_threshold_or_when_off(clip):
    x = torch.tensor([3.0, -4.0, 12.0, 0.0])
    model = huge_gradient_model(x)
    data = type("D", (), {"train_dataloader": lambda self: [(x,)]})()
    fit(model, data, max_epochs=1, gradient_clip_val=clip)
    torch.testing.assert_close(grads(model),
                               1e6 * torch.cat([x, torch.ones(1)]))


@pytest.mark.parametrize("kwargs, match", [
    ({"gradient_clip_val": -1.0}, "gradient_clip_val"),
    ({"gradient_clip_val": float("nan")}, "gradient_clip_val"),
    ({"max_epochs": 0}, "max_epochs"),
    ({"max_steps": 2.5}, "max_steps"),
    ({"val_every_n_steps": 0}, "val_every_n_steps"),
    ({"max_time": 0}, "max_time"),
    ({"max_epochs": None}, "never stops"),
    ({"device": "banana"}, "unknown device"),
])
def test_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        Trainer(**kwargs)


def test_optimizer_state_kept_across_epochs():
    trainer, h = fit(max_epochs=3)
    opt = trainer.optimizer
    assert isinstance(opt, torch.optim.Adam)
    for p in opt.param_groups[0]["params"]:
        assert int(opt.state[p]["step"]) == h.num_steps == 24


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_non_finite_loss_raises_at_first_bad_step(bad):
    class Diverges(Regression):
        def training_step(self, batch):
            loss, n = super().training_step(batch)
            calls = sum(1 for e in self.log if e[0] == "train")
            return (loss * bad if calls == 3 else loss), n

    trainer = Trainer(max_epochs=2, progress=False)
    with pytest.raises(FloatingPointError, match="step 3;.*learning rate"):
        trainer.fit(Diverges(), Data())
    # the bad step made no update: Adam counted only the two good ones
    state = trainer.optimizer.state.values()
    assert [int(s["step"]) for s in state] == [2, 2]


def test_non_finite_validation_loss_raises():
    class BadVal(Regression):
        def validation_step(self, batch):
            loss, n = super().validation_step(batch)
            return loss * float("nan"), n

    with pytest.raises(FloatingPointError, match="validation loss.*step 8"):
        fit(BadVal(), max_epochs=1)


def test_seeded_runs_are_identical_on_cpu():
    def run(seed):
        torch.manual_seed(0)  # same initial weights
        _, h = fit(Regression(dropout=0.3), max_epochs=2, seed=seed,
                   device="cpu")
        return [loss for _, loss in h.steps], h.val_loss

    assert run(1) == run(1)
    # the seed does matter (shuffling and dropout), so the check can fail
    assert run(1)[0] != run(2)[0]


def test_max_steps_stops_mid_epoch_and_validates_there():
    _, h = fit(max_epochs=3, max_steps=5)
    assert h.num_steps == 5 and h.epochs == pytest.approx(5 / 8)
    assert len(h.train_loss) == len(h.val_loss) == 1
    assert [s for s, _ in h.val_steps] == [5]


def test_max_time_counts_training_but_not_validation():
    """A fake clock: a training step 'takes' 10 s, a validation 100 s."""
    now = [0.0]

    class Slow(Regression):
        def training_step(self, batch):
            now[0] += 10.0
            return super().training_step(batch)

        def validation_step(self, batch):
            now[0] += 100.0
            return super().validation_step(batch)

    _, h = fit(Slow(), max_epochs=5, max_time=35.0, val_every_n_steps=2,
               clock=lambda: now[0])
    assert h.num_steps == 4 and h.train_time == 40.0
    assert [s for s, _ in h.val_steps] == [2, 4]
    assert h.tokens_per_second == 4 * 8 / 40.0
    # 2 validations of 4 batches each count in the epoch time only
    assert h.epoch_time == [40.0 + 2 * 4 * 100.0]


def test_bare_loss_counts_examples_and_non_tensors_are_left_alone():
    class Bare(Regression):
        def training_step(self, batch):
            assert batch[2] == "tag" and batch[0].device.type == "cpu"
            return super().training_step(batch)[0]

    X, y = torch.randn(10, 3), torch.randn(10)
    batches = [(X[:6], y[:6], "tag"), (X[6:], y[6:], "tag")]
    data = type("D", (), {"train_dataloader": lambda self: batches})()
    _, h = fit(Bare(), data, max_epochs=2)
    assert h.num_tokens == 20 and h.epochs == 2.0
    # batches of 6 and 4 examples weight the epoch mean 6:4
    (_, first), (_, second) = h.steps[:2]
    assert h.train_loss[0] == pytest.approx(0.6 * first + 0.4 * second)


def test_contract_errors():
    class Vector(Regression):
        def training_step(self, batch):
            X, y = batch
            return (self(X) - y) ** 2, len(y)

    with pytest.raises(TypeError, match=r"scalar loss.*\(8,\)"):
        fit(Vector())
    empty = type("D", (), {"train_dataloader": lambda self: []})()
    with pytest.raises(ValueError, match="no batches"):
        fit(data=empty)

    class NoOptim(Regression):
        def configure_optimizers(self):
            return "adam"

    with pytest.raises(TypeError, match="torch optimizer"):
        fit(NoOptim())


def test_device_selection(monkeypatch):
    assert Trainer(device="cpu").device == torch.device("cpu")
    assert Trainer(device=torch.device("cpu")).device.type == "cpu"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert Trainer().device == torch.device("cuda")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    assert Trainer().device == torch.device("cpu")
    with pytest.raises(ValueError, match="not available"):
        Trainer(device="cuda")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_fit_on_cuda():
    torch.manual_seed(0)
    model = Regression()
    trainer, h = fit(model, max_epochs=3, device="cuda", seed=0)
    assert next(model.parameters()).device.type == "cuda"
    assert h.train_loss[-1] < h.train_loss[0]


def test_progress_bar_on_and_off(capsys):
    fit(max_epochs=1, progress=False)
    assert capsys.readouterr() == ("", "")
    fit(max_epochs=1, progress=True)
    err = capsys.readouterr().err
    assert "8/8" in err and "tok/s" in err


class LoggedLR(Regression):
    """Records the learning rate each training step runs with."""

    def configure_optimizers(self):
        self.opt = super().configure_optimizers()
        self.lrs = []
        return self.opt

    def training_step(self, batch):
        self.lrs.append(self.opt.param_groups[0]["lr"])
        return super().training_step(batch)


def test_linear_warmup_then_constant():
    model = LoggedLR(lr=0.1)
    fit(model, max_epochs=None, max_steps=8, warmup_steps=4)
    assert model.lrs == pytest.approx([0.025, 0.05, 0.075, 0.1,
                                       0.1, 0.1, 0.1, 0.1])


def test_cosine_schedule_decays_to_zero_at_the_last_step():
    model = LoggedLR(lr=0.1)
    fit(model, max_epochs=None, max_steps=4, schedule="cosine")
    assert model.lrs == pytest.approx([0.1, 0.0853553, 0.05, 0.0146447],
                                      rel=1e-5)
    # with epochs, the last step is len(loader) * max_epochs = 16
    model = LoggedLR(lr=0.1)
    fit(model, max_epochs=2, warmup_steps=2, schedule="cosine")
    assert len(model.lrs) == 16 and model.lrs[:2] == pytest.approx(
        [0.05, 0.1 * 0.5 * (1 + math.cos(math.pi / 16))])


def test_schedule_arguments_are_checked():
    for kwargs, words in (({"warmup_steps": -1}, "warmup_steps must be"),
                          ({"warmup_steps": 1.5}, "warmup_steps must be"),
                          ({"schedule": "linear"}, "schedule must be one"),
                          ({"seed": -1}, "seed must be an int >= 0"),
                          ({"seed": True}, "seed must be an int")):
        with pytest.raises(ValueError, match=words):
            Trainer(**kwargs)
    with pytest.raises(ValueError, match="needs to know the last step"):
        fit(max_epochs=None, max_time=1.0, schedule="cosine")


class FailingValidation(Regression):
    def validation_step(self, batch):
        raise RuntimeError("broken validation")


def test_validate_restores_train_mode_when_a_step_raises():
    model = FailingValidation(dropout=0.5)
    model.train()
    with pytest.raises(RuntimeError, match="broken validation"):
        Trainer(progress=False).validate(model, Data().val_dataloader())
    assert model.training and model.net[0].training


class NumpyNoise(Regression):
    """Draws from NumPy's global generator, as data augmentation might."""

    def training_step(self, batch):
        self.draws = [*getattr(self, "draws", []), np.random.rand()]
        return super().training_step(batch)


def test_the_trainer_seed_seeds_every_global_generator():
    a, b = NumpyNoise(), NumpyNoise()
    fit(a, max_epochs=1, seed=3)
    fit(b, max_epochs=1, seed=3)
    assert a.draws == b.draws and len(set(a.draws)) == len(a.draws)


# One trainer for every model: what the language model and the ViT need.

def test_cosine_after_warmup_starts_the_cosine_when_the_warmup_ends():
    trainer = Trainer(max_steps=10, warmup_steps=4,
                      schedule="cosine-after-warmup")
    f = trainer._lr_factor(10)
    assert [f(s) for s in range(4)] == [0.25, 0.5, 0.75, 1.0]
    assert f(4) == 1.0 and f(7) == pytest.approx(0.5) and f(10) == 0.0
    # 'cosine' multiplies the warm-up by a cosine that began at step 0
    g = Trainer(max_steps=10, warmup_steps=4, schedule="cosine")._lr_factor(
        10)
    assert g(4) < 1.0
    with pytest.raises(ValueError, match="needs to know the last step"):
        fit(max_epochs=None, max_time=5.0, schedule="cosine-after-warmup",
            data=type("D", (), {"train_dataloader": lambda self: iter(
                [(torch.randn(2, 3), torch.randn(2))])})())


def test_every_calls_its_function_every_n_steps_and_at_the_last():
    seen = []
    every = Every(3, lambda model, step: seen.append(step) or step * 10)
    _, h = fit(max_epochs=None, max_steps=8, callbacks=[every],
               val_at_epoch_end=False)
    assert every.records == [(3, 30), (6, 60), (8, 80)] and seen == [3, 6, 8]
    assert h.val_loss == [] and h.val_steps == []
    assert h.means_between([3, 6, 8]) == pytest.approx([
        sum(v for s, v in h.steps if lo < s <= hi) / (hi - lo)
        for lo, hi in ((0, 3), (3, 6), (6, 8))])
    with pytest.raises(TypeError, match="callable"):
        Every(3, "perplexity")


def test_validation_every_n_steps_without_epoch_ends_ends_at_the_last():
    _, h = fit(max_epochs=3, max_steps=20, val_every_n_steps=6,
               val_at_epoch_end=False)
    assert [s for s, _ in h.val_steps] == [6, 12, 18, 20]


def test_reading_losses_every_few_steps_changes_nothing_it_records():
    def run(sync_every):
        torch.manual_seed(0)
        _, h = fit(max_epochs=2, seed=1, sync_every=sync_every)
        return h.steps, h.train_loss, h.val_loss, h.num_tokens

    assert run(5) == run(1)


def test_a_late_read_still_names_the_first_bad_step():
    class Diverges(Regression):
        def training_step(self, batch):
            loss, n = super().training_step(batch)
            calls = sum(1 for e in self.log if e[0] == "train")
            return (loss * float("nan") if calls == 3 else loss), \
                torch.tensor(n)

    with pytest.raises(FloatingPointError, match="step 3;"):
        fit(Diverges(), max_epochs=2, sync_every=4)


def test_token_counts_may_be_tensors_and_are_checked_when_read():
    class Counts(Regression):
        def training_step(self, batch):
            loss, n = super().training_step(batch)
            return loss, torch.tensor(n if len(self.log) < 6 else 0)

    _, h = fit(Counts(), max_epochs=1, max_steps=2, sync_every=8)
    assert h.num_tokens == 16
    with pytest.raises(ValueError, match="num_tokens=0"):
        fit(Counts(), max_epochs=1, sync_every=8)
    with pytest.raises(TypeError, match="0-d tensor"):
        fit(type("Vec", (Regression,), {"training_step": lambda self, b: (
            Regression.training_step(self, b)[0], torch.ones(2))})())


def test_bf16_autocast_trains_close_to_float32_on_the_cpu():
    def run(precision):
        torch.manual_seed(0)
        _, h = fit(max_epochs=2, seed=0, precision=precision)
        return [v for _, v in h.steps]

    assert run("bf16") == pytest.approx(run("fp32"), rel=0.05)
    with pytest.raises(ValueError, match="precision must be one of"):
        Trainer(precision="fp16")
