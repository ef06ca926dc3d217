"""The Transformer's training step against the same model built from
PyTorch's own layers.

Usage::

    python benchmarks/transformer_step.py [--steps 30] [--repeats 5]

Builds the Transformer section's model (``TRANSFORMER_RECIPE``: 2
encoder and 2 decoder blocks of width 128, 4 heads, position-wise
networks of 512, post-norm, ReLU, no dropout) twice: with d2lmini's
blocks, and with ``nn.TransformerEncoderLayer`` and
``nn.TransformerDecoderLayer`` (``batch_first``, ``norm_first=False``)
around the same embeddings, positions and output layer, holding the
same weights (``d2lmini.transformer.copy_from_pytorch``).  PyTorch's
step gets the same work cut as d2lmini's ``training_step``: the columns
after the longest source and the longest label are dropped, the output
layer sees the non-pad labels only, the source padding is a
``key_padding_mask`` and the target's causal mask is passed with
``tgt_is_causal``.  It first checks that both give the same loss and
the same gradient of the output layer, then times ``--steps`` training
steps (``step_time.time_steps``: forward, backward, clipping, fused
Adam, after its warm-up steps) of each on the chapter's batches, the two taking
turns for ``--repeats`` rounds, and prints the medians and their ratio
(below 1 means d2lmini is faster).  Not a test: numbers depend on the
machine.  Needs the corpus (``D2LMINI_DATA_DIR``).
"""

import argparse
import copy
import itertools
import math
import statistics
import sys
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from d2lmini.experiment import TRANSFORMER_RECIPE, build_data, build_model
from d2lmini.transformer import copy_from_pytorch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from step_time import WARMUP, time_steps  # noqa: E402  (step_time.py)

R = TRANSFORMER_RECIPE


class TorchTransformer(nn.Module):
    """d2lmini's Transformer with PyTorch's encoder and decoder layers."""

    def __init__(self, ours):
        super().__init__()
        D, h, F_ = R.num_hiddens, R.num_heads, R.ffn_num_hiddens
        self.num_hiddens, self.tgt_pad = D, ours.tgt_pad
        enc, dec = ours.encoder, ours.decoder
        self.src_embedding = copy.deepcopy(enc.embedding)
        self.tgt_embedding = copy.deepcopy(dec.embedding)
        self.register_buffer("P", enc.pos_encoding.P.clone(),
                             persistent=False)
        kwargs = dict(dropout=R.dropout, batch_first=True)
        self.encoder = nn.ModuleList(
            nn.TransformerEncoderLayer(D, h, F_, **kwargs)
            for _ in enc.blks)
        self.decoder = nn.ModuleList(
            nn.TransformerDecoderLayer(D, h, F_, **kwargs)
            for _ in dec.blks)
        self.dense = copy.deepcopy(dec.dense)
        for block, layer in itertools.chain(zip(enc.blks, self.encoder),
                                            zip(dec.blks, self.decoder)):
            _copy_into_pytorch(block, layer)

    def configure_optimizers(self):
        """Adam with the fused kernel, as ``Seq2Seq`` configures it."""
        return torch.optim.Adam(self.parameters(), lr=R.lr, fused=True)

    def _embed(self, embedding, X):
        return embedding(X) * math.sqrt(self.num_hiddens) \
            + self.P[:X.shape[1]]

    def training_step(self, batch):
        src, tgt_input, src_valid_len, label = batch
        mask = label != self.tgt_pad  # (B, T)
        S, T = int(src_valid_len.max()), int(mask.sum(1).max())
        src, tgt_input, mask = src[:, :S], tgt_input[:, :T], mask[:, :T]
        padding = torch.arange(S) >= src_valid_len[:, None]  # True: pad
        H = self._embed(self.src_embedding, src)
        for layer in self.encoder:
            H = layer(H, src_key_padding_mask=padding)
        causal = nn.Transformer.generate_square_subsequent_mask(T)
        Y = self._embed(self.tgt_embedding, tgt_input)
        for layer in self.decoder:
            Y = layer(Y, H, tgt_mask=causal, tgt_is_causal=True,
                      memory_key_padding_mask=padding)
        return F.cross_entropy(self.dense(Y[mask]),
                               label[:, :T][mask]), int(mask.sum())


def _copy_into_pytorch(block, layer):
    """The inverse of ``copy_from_pytorch``: ``layer`` gets ``block``'s
    weights (checked by copying them back and comparing)."""
    names = {"attention": "self_attn", "self_attention": "self_attn",
             "cross_attention": "multihead_attn"}
    with torch.no_grad():
        for ours, theirs in names.items():
            if not hasattr(block, ours):
                continue
            a, t = getattr(block, ours), getattr(layer, theirs)
            t.in_proj_weight.copy_(torch.cat(
                [a.W_q.weight, a.W_k.weight, a.W_v.weight]))
            t.in_proj_bias.copy_(torch.cat(
                [a.W_q.bias, a.W_k.bias, a.W_v.bias]))
            t.out_proj.weight.copy_(a.W_o.weight)
            t.out_proj.bias.copy_(a.W_o.bias)
        pairs = [(block.ffn.dense1, layer.linear1),
                 (block.ffn.dense2, layer.linear2)]
        norms = [m for n, m in block.named_children()
                 if n.startswith("addnorm")]
        pairs += [(n.ln, getattr(layer, f"norm{i}"))
                  for i, n in enumerate(norms, 1)]
        for ours, theirs in pairs:
            theirs.weight.copy_(ours.weight)
            theirs.bias.copy_(ours.bias)
    check = copy_from_pytorch(copy.deepcopy(block), layer)
    for a, b in zip(check.state_dict().values(),
                    block.state_dict().values()):
        if not torch.equal(a, b):
            raise RuntimeError("the weights did not copy into PyTorch's "
                               "layer")


def check_same(ours, theirs, batch):
    """Both give the same loss and the same gradients."""
    losses, grads = [], []
    for model in (ours, theirs):
        model.zero_grad()
        loss, _ = model.training_step(batch)
        loss.backward()
        losses.append(loss.item())
        dense = getattr(model, "dense", None) or model.decoder.dense
        grads.append(dense.weight.grad.clone())
    torch.testing.assert_close(losses[0], losses[1], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(grads[0], grads[1], rtol=1e-4, atol=1e-6)
    return losses


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    data = build_data(R)
    batches = list(itertools.islice(data.train_dataloader(),
                                    WARMUP + args.steps))
    losses = check_same(build_model(R, data),
                        TorchTransformer(build_model(R, data)), batches[0])
    print(f"the same loss on a batch: d2lmini {losses[0]:.6f}, PyTorch's "
          f"layers {losses[1]:.6f}; the same output-layer gradient")
    times = {"d2lmini": [], "PyTorch layers": []}
    for _ in range(args.repeats):
        ours = build_model(R, data)
        for name, model in (("d2lmini", ours),
                            ("PyTorch layers", TorchTransformer(ours))):
            times[name].append(time_steps(model, batches))
    med = {name: statistics.median(t) for name, t in times.items()}
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; "
          f"{args.steps} training steps of the chapter's batches, median "
          f"of {args.repeats} interleaved rounds:")
    for name, t in times.items():
        print(f"  {name:15} {1000 * med[name]:7.1f} ms a step (min "
              f"{1000 * min(t):.1f}, max {1000 * max(t):.1f})")
    ratio = med["d2lmini"] / med["PyTorch layers"]
    print(f"d2lmini / PyTorch layers: {ratio:.3f}")


if __name__ == "__main__":
    main()
