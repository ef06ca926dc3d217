"""Pretraining in miniature: masks, objectives, a decoder-only language
model, n-gram baselines and perplexity.

The three Transformer families differ in who may attend to whom:
``attention_mask`` draws the mask, ``mask_valid_lens`` gives the
``valid_lens`` that ``masked_softmax`` takes for it.  ``LanguageModel``
is the chapter's ``TransformerEncoderBlock`` with a causal mask: the
same blocks, a different mask.  ``mask_tokens`` and ``masked_lm_loss``
are BERT's objective, ``next_token_loss`` GPT's; ``NgramLM`` and
``perplexity`` give the baselines.  Sampling text from the model is
``d2lmini.generation``.

Shape legend for every comment and docstring in this module:
    B  batch size      T  time steps (queries)     S  keys
    D  num_hiddens     F  ffn_num_hiddens          V  vocabulary size
    h  heads
"""

import math
from collections import Counter

import torch
import torch.nn.functional as F
from torch import nn

from .transformer import TransformerEncoderBlock, _Stack, causal_lens
from .utils import check_int

__all__ = ["IGNORE_INDEX", "MASK_KINDS", "LanguageModel", "NgramLM",
           "attention_mask", "mask_tokens", "mask_valid_lens",
           "masked_lm_loss", "next_token_loss", "perplexity"]

IGNORE_INDEX = -100  # a label that no loss counts (PyTorch's default)
MASK_KINDS = ("bidirectional", "causal", "cross")


def _check_kind(kind):
    if kind not in MASK_KINDS:
        raise ValueError(f"kind must be one of {MASK_KINDS}, got {kind!r}")


def _check_setting(name, value, ok, rule):
    """Raise unless ``ok(value)`` (never for a bool): "name must be
    rule, got value"."""
    if isinstance(value, bool) or not ok(value):
        raise ValueError(f"{name} must be {rule}, got {value!r}")


def attention_mask(kind, T, S=None):
    """Who may attend to whom: a (T, S) boolean matrix, True where query
    t may attend to key s.

    ``"bidirectional"`` (encoder self-attention, S = T): every key.
    ``"causal"`` (decoder self-attention, S = T): keys s <= t.
    ``"cross"`` (decoder to encoder; S, the source length, required):
    every key.  Padding is not part of it: see ``mask_valid_lens``.
    """
    _check_kind(kind)
    check_int("T", T)
    if kind == "cross":
        check_int("S (the number of source steps)", S)
    elif S is not None and S != T:
        raise ValueError(f"{kind} self-attention has S = T keys (the "
                         f"queries themselves): got T={T}, S={S}")
    if kind == "causal":
        return torch.ones(T, T, dtype=torch.bool).tril()  # (T, T)
    return torch.ones(T, S or T, dtype=torch.bool)  # (T, S)


def _check_lens(lens, B, most, what):
    """(B,) integer lengths in [0, most] as a new int64 tensor."""
    lens = torch.as_tensor(lens)
    if lens.is_floating_point() or lens.is_complex() \
            or lens.dtype == torch.bool:
        raise TypeError(f"lens must hold integers, got dtype {lens.dtype}")
    if lens.shape != (B,):
        raise ValueError(f"lens must have shape ({B},), one length per "
                         f"sequence, got {tuple(lens.shape)}")
    if len(lens) and (lens.min() < 0 or most is not None
                      and lens.max() > most):
        top = "S" if most is None else most
        raise ValueError(f"lens must lie in [0, {top}] ({what}), got "
                         f"{lens.tolist()}")
    return lens.to(torch.int64, copy=True)


def mask_valid_lens(kind, B, T, lens=None, *, S=None):
    """The ``valid_lens`` that makes ``masked_softmax`` apply the mask
    of ``attention_mask(kind, ...)`` and the padding of ``lens``.

    Args:
        kind: ``"bidirectional"``, ``"causal"`` or ``"cross"``.
        B, T: batch size and number of queries.
        lens: (B,) numbers of real (non-padding) keys, or None; for
            ``"cross"`` the source lengths, at most ``S`` if given.
        S: the number of keys: T for self-attention (None means T),
            the source length for ``"cross"`` (None: not checked).

    Returns:
        ``"bidirectional"``, ``"cross"``: ``lens`` as a new (B,)
        tensor, or None (no padding: a plain softmax).  ``"causal"``:
        (B, T), query t sees min(t + 1, lens) keys; padding at the end
        is already hidden from real tokens by causality, the lengths
        also keep padded queries off padded keys.
    """
    _check_kind(kind)
    check_int("B", B, 0)
    check_int("T", T)
    if kind != "cross" and S not in (None, T):
        raise ValueError(f"{kind} self-attention has S = T keys (the "
                         f"queries themselves): got T={T}, S={S}")
    most = T if kind != "cross" else S
    if lens is not None:
        lens = _check_lens(lens, B, most, "the keys of each sequence")
    if kind != "causal":
        return lens
    causal = causal_lens(B, T, device=getattr(lens, "device", None))
    return causal if lens is None else torch.minimum(causal, lens[:, None])


def mask_tokens(tokens, vocab_size, specials, p=0.15, generator=None, *,
                mask_id):
    """BERT's masked-token corruption of a batch of ids.

    Each token whose id is not in ``specials`` (nor ``mask_id``) is
    chosen with probability ``p``; a chosen token becomes ``mask_id``
    with probability 0.8, a uniformly drawn non-special id with 0.1, and
    stays itself with 0.1.  The draws come from ``generator`` (PyTorch's
    global one if None), always the same number per call, so a seeded
    generator gives the same corruption.  ``tokens`` is not modified.

    Args:
        tokens: integer ids of any shape, each in [0, V).
        vocab_size: V, counting ``mask_id`` (a ``<mask>`` token added to
            the vocabulary, e.g. ``Vocab(..., reserved_tokens=
            RESERVED_TOKENS + ("<mask>",))``).
        specials: ids never chosen (pad, bos, eos, unk, ...).
        p: the probability of choosing a token, in [0, 1].
        mask_id: the id that replaces most chosen tokens.

    Returns:
        ``(inputs, labels)``, both shaped like ``tokens``: the corrupted
        ids, and the original id at chosen positions, ``IGNORE_INDEX``
        (-100) elsewhere.
    """
    check_int("vocab_size", vocab_size)
    _check_ids(tokens, vocab_size, "tokens", dims=None)
    specials = {int(s) for s in specials} | {int(mask_id)}
    bad = sorted(s for s in specials if not 0 <= s < vocab_size)
    if bad:
        raise ValueError(f"specials and mask_id must be ids in [0, "
                         f"{vocab_size}), got {bad}")
    _check_setting("p", p, lambda p: isinstance(p, (int, float))
                   and 0 <= p <= 1, "a probability in [0, 1]")
    allowed = torch.tensor([i for i in range(vocab_size)
                            if i not in specials])
    if not len(allowed):
        raise ValueError(f"every id of the vocabulary of {vocab_size} is "
                         f"special: there is no token to mask")
    is_special = torch.isin(tokens, torch.tensor(sorted(specials),
                                                 device=tokens.device))
    draws = dict(generator=generator, device=tokens.device)
    chosen = (torch.rand(tokens.shape, **draws) < p) & ~is_special
    action = torch.rand(tokens.shape, **draws)  # < .8 mask, < .9 random
    random_ids = allowed.to(tokens.device)[torch.randint(
        len(allowed), tokens.shape, **draws)]
    inputs = torch.where(chosen & (action < 0.8), mask_id, tokens)
    inputs = torch.where(chosen & (action >= 0.8) & (action < 0.9),
                         random_ids, inputs)
    labels = torch.where(chosen, tokens, IGNORE_INDEX)
    return inputs, labels


def _check_ids(X, V, name, dims=2):
    """Raise unless X is an integer id tensor (``dims``-D) in [0, V)."""
    if not torch.is_tensor(X) or X.is_floating_point() or X.is_complex() \
            or X.dtype == torch.bool:
        raise TypeError(f"{name} must be a tensor of integer ids, got "
                        f"{getattr(X, 'dtype', type(X).__name__)}")
    if dims is not None and X.dim() != dims:
        raise ValueError(f"{name} must be {dims}-D (B, T), got shape "
                         f"{tuple(X.shape)}")
    if X.numel() and (X.min() < 0 or X.max() >= V):
        raise ValueError(f"{name} must be ids in [0, {V}), got values "
                         f"from {int(X.min())} to {int(X.max())}")


class LanguageModel(_Stack):
    """A decoder-only Transformer: embeddings times sqrt(D), positions,
    ``num_blks`` post-norm ``TransformerEncoderBlock``s under a causal
    mask, and an output layer (tied to the embedding by default: its
    weight is the embedding matrix, plus a bias).

    Args:
        vocab_size: V.  num_hiddens, ffn_num_hiddens, num_heads,
        num_blks, dropout: as ``TransformerEncoder``.
        max_len: the longest sequence the positions cover.
        tie_weights: share the output layer's weight with the embedding.

    Shape:
        ``forward(X, valid_lens=None)``: ids X (B, T), valid_lens (B,)
        numbers of real tokens (padding at the end) or None.  Returns
        logits (B, T, V); position t predicts token t + 1 from tokens
        0..t only.  ``attention_weights[i]`` is block i's (B, h, T, T)
        of the last forward.
    """

    def __init__(self, vocab_size, num_hiddens, ffn_num_hiddens, num_heads,
                 num_blks, dropout=0.0, max_len=256, tie_weights=True, *,
                 lr=0.002, weight_decay=0.01):
        check_int("vocab_size", vocab_size)
        super().__init__(TransformerEncoderBlock, vocab_size, num_hiddens,
                         ffn_num_hiddens, num_heads, num_blks, dropout,
                         max_len)
        self.vocab_size, self.max_len = vocab_size, max_len
        self.dense = nn.Linear(num_hiddens, vocab_size)
        if tie_weights:  # one (V, D) matrix reads and writes tokens
            self.dense.weight = self.embedding.weight
        self.tie_weights = tie_weights
        self.lr, self.weight_decay = lr, weight_decay

    @property
    def attention_weights(self):
        return [blk.attention.attention_weights for blk in self.blks]

    def training_step(self, batch):
        """``(loss, num_tokens)`` of a batch ``(X, lens)`` for
        ``d2lmini.Trainer``: the mean next-token cross-entropy over the
        targets inside each row's ``lens`` (``next_token_loss`` with the
        padding found from ``lens``), and their number, as a tensor (read
        from the device only when the trainer reads it)."""
        X, lens = batch
        targets = X[:, 1:]  # (B, T - 1); target t + 1 is real if < lens
        real = torch.arange(1, X.shape[1], device=X.device) < lens[:, None]
        logits = self(X, lens)[:, :-1]  # (B, T - 1, V)
        loss = F.cross_entropy(logits.transpose(1, 2),
                               targets.masked_fill(~real, IGNORE_INDEX),
                               ignore_index=IGNORE_INDEX)
        return loss, real.sum()

    def configure_optimizers(self):
        """AdamW with the model's ``lr`` and ``weight_decay``."""
        return torch.optim.AdamW(self.parameters(), lr=self.lr,
                                 weight_decay=self.weight_decay)

    def forward(self, X, valid_lens=None):
        _check_ids(X, self.vocab_size, "X")
        B, T = X.shape
        lens = mask_valid_lens("causal", B, T, valid_lens)  # (B, T)
        H = self._embed(X)  # (B, T, D)
        for blk in self.blks:
            H = blk(H, lens.to(H.device))
        return self.dense(H)  # (B, T, V)


def _check_logits(logits, X, what):
    if logits.dim() != 3 or logits.shape[:2] != X.shape:
        raise ValueError(f"logits must be (B, T, V) for {what} of shape "
                         f"{tuple(X.shape)}, got {tuple(logits.shape)}")


def next_token_loss(logits, X, pad_id):
    """Mean cross-entropy of predicting X[:, t + 1] from logits[:, t],
    over the targets that are not ``pad_id``.

    Shape: logits (B, T, V) of ``LanguageModel(X)``; X (B, T) ids.
    """
    _check_logits(logits, X, "ids X")
    targets = X[:, 1:]  # (B, T - 1)
    if not (targets != pad_id).any():
        raise ValueError(f"no target to predict: every token after the "
                         f"first is padding ({pad_id}); give X of at "
                         f"least 2 real tokens per row")
    return F.cross_entropy(logits[:, :-1].transpose(1, 2), targets,
                           ignore_index=pad_id)


def masked_lm_loss(logits, labels):
    """Mean cross-entropy at the chosen positions of ``mask_tokens``
    (labels != -100).  Shape: logits (B, T, V), labels (B, T)."""
    _check_logits(logits, labels, "labels")
    if not (labels != IGNORE_INDEX).any():
        raise ValueError("no position was chosen (every label is -100): "
                         "raise p or give longer sequences")
    return F.cross_entropy(logits.transpose(1, 2), labels,
                           ignore_index=IGNORE_INDEX)


class NgramLM:
    """Unigram (n=1) or bigram (n=2) model with add-k smoothing.

    p(w) = (c(w) + k) / (N + k V);  p(w | u) = (c(u w) + k) / (c(u) + k V),
    counted by ``fit(sentences, bos, eos)`` over each sentence wrapped
    in ``bos ... eos`` (the tokens ``perplexity`` scores: every one
    after ``bos``).  k = 0 gives maximum likelihood: an unseen token has
    probability 0 and an unseen context is an error.
    """

    def __init__(self, n, vocab_size, k=1.0):
        if n not in (1, 2):
            raise ValueError(f"n must be 1 (unigram) or 2 (bigram), "
                             f"got {n!r}")
        check_int("vocab_size", vocab_size)
        if not (isinstance(k, (int, float)) and 0 <= k < math.inf):
            raise ValueError(f"k must be a finite number >= 0, got {k!r}")
        self.n, self.vocab_size, self.k = n, vocab_size, k
        self.counts, self.contexts = Counter(), Counter()

    def fit(self, sentences, bos, eos):
        """Count the tokens (and pairs) of ``sentences``, lists of ids."""
        for s in sentences:
            ids = [bos, *s, eos]
            _check_id_list(ids, self.vocab_size, "a sentence")
            for u, w in zip(ids, ids[1:]):
                self.counts[(u, w) if self.n == 2 else w] += 1
                self.contexts[u if self.n == 2 else None] += 1
        return self

    def log_prob(self, next, prev=None):
        """log p(next | prev) (prev is ignored by a unigram model)."""
        ctx = prev if self.n == 2 else None
        total = self.contexts[ctx] + self.k * self.vocab_size
        if total == 0:
            raise ValueError(f"context {prev} was never seen and k = 0: "
                             f"its next token has no distribution")
        count = self.counts[(prev, next) if self.n == 2 else next] + self.k
        return math.log(count / total) if count else -math.inf

    def probs(self, prev=None):
        """(V,) float64 p(w | prev) of every id w."""
        return torch.tensor([math.exp(self.log_prob(w, prev))
                             for w in range(self.vocab_size)],
                            dtype=torch.float64)


def _check_id_list(ids, V, what):
    bad = [i for i in ids if isinstance(i, bool) or not isinstance(i, int)
           or not 0 <= i < V]
    if bad:
        raise ValueError(f"{what} must hold int ids in [0, {V}), got "
                         f"{bad[:5]} in {list(ids)[:12]}")


def _device(model):
    """Where a module's parameters are (the CPU if it has none)."""
    return next(model.parameters(), torch.empty(0)).device


def _model_log_probs(model, sequences, batch_size):
    """Sum of log p(x_t | x_<t), t >= 1, and the count of those tokens,
    for id lists under a model that maps (B, T) ids to (B, T, V)."""
    total, count = 0.0, 0
    for start in range(0, len(sequences), batch_size):
        chunk = sequences[start:start + batch_size]
        lens = torch.tensor([len(s) for s in chunk])
        X = torch.zeros(len(chunk), int(lens.max()), dtype=torch.long)
        for row, s in zip(X, chunk):  # padded with id 0, masked below
            row[:len(s)] = torch.tensor(s)
        logits = model(X.to(_device(model)),
                       lens.to(_device(model))).double().cpu()  # (B, T, V)
        logp = logits[:, :-1].log_softmax(-1).gather(
            -1, X[:, 1:, None]).squeeze(-1)  # (B, T - 1)
        real = torch.arange(1, X.shape[1]) < lens[:, None]
        total += float(logp[real].sum())
        count += int(real.sum())
    return total, count


def perplexity(model, sentences, bos, eos, batch_size=64):
    """exp of the mean -log p over every token after ``bos`` of each
    sentence wrapped as ``bos ... eos`` (so ``eos`` counts, ``bos`` not).

    ``model`` is an ``NgramLM``, or a module (a ``LanguageModel``) that
    maps ids (B, T) and lengths (B,) to logits (B, T, V); it runs in
    eval mode without gradients and gets its mode back.
    """
    sentences = [[bos, *s, eos] for s in sentences]
    if not sentences:
        raise ValueError("perplexity of no sentences: give at least one")
    V = getattr(model, "vocab_size", None)
    for s in sentences if V else ():
        _check_id_list(s, V, "a sentence with bos and eos")
    if isinstance(model, NgramLM):
        total = sum(model.log_prob(w, u) for s in sentences
                    for u, w in zip(s, s[1:]))
        count = sum(len(s) - 1 for s in sentences)
    else:
        was_training = model.training
        model.eval()
        try:
            with torch.no_grad():
                total, count = _model_log_probs(model, sentences, batch_size)
        finally:
            model.train(was_training)
    return math.exp(-total / count)

