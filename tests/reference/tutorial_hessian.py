#!/usr/bin/env python3
"""Hessian extremes of the PyTorch translation tutorial's model, independently of normlab.

The Hessian report (../shared/papers/hessian-spectrum-at-init-report.md) gives |lambda_max|
about 3 (Post-LN) and 1 (Pre-LN) at 6+6 layers; `normlab hessian` measures 15-50x that
(docs/hessian.md). The report names neither its code nor its tokenisation; its setting (Multi30k
de-en, nn.Transformer sizes, Xavier on every matrix, label smoothing 0.1, Lanczos) is that of the
PyTorch tutorial "Language Translation with nn.Transformer and torchtext". This script builds
that model from torch.nn alone (no normlab code or weights): word-level vocabularies of the
training text (min frequency 1, the tutorial's four specials), TokenEmbedding scaled by
sqrt(d), sinusoidal positions, `nn.Transformer` (its final encoder and decoder LayerNorms
included; `norm_first` for Pre-LN), an untied `generator`, `xavier_uniform_` on every parameter
with more than one dimension. Then Lanczos with full re-orthogonalisation over the first N
pairs of a data set, the label-smoothed loss averaged over all target tokens (each batch's HVP
weighted by its share of the tokens), dropout off, float32.

The tutorial tokenises with spaCy; this uses `\\w+|[^\\w\\s]` (words and punctuation apart),
which gives vocabularies of the same order (Multi30k train: see the printed sizes).

  python3 tests/reference/tutorial_hessian.py --train ../shared/data/multi30k/train \
      --data ../shared/data/multi30k/val --sentences 100 --steps 12 --scheme post-ln
"""
import argparse
import collections
import gzip
import json
import os
import math
import re
import sys
import time

import torch
from torch import nn
from torch.nn.attention import SDPBackend, sdpa_kernel

SPECIALS = ["<unk>", "<pad>", "<bos>", "<eos>"]  # the tutorial's order: UNK 0, PAD 1, BOS 2, EOS 3
UNK, PAD, BOS, EOS = range(4)
TOKEN = re.compile(r"\w+|[^\w\s]")


def read_lines(path, limit=None):
    """PATH or PATH.gz, one sentence a line."""
    if not os.path.exists(path) and os.path.exists(path + ".gz"):
        path += ".gz"
    with (gzip.open if path.endswith(".gz") else open)(path, "rt", encoding="utf-8") as f:
        lines = [line.rstrip("\n") for line in f]
    return lines[:limit] if limit else lines


def build_vocab(lines):
    counts = collections.Counter(tok for line in lines for tok in TOKEN.findall(line))
    words = sorted(counts, key=lambda w: (-counts[w], w))
    return {w: i for i, w in enumerate(SPECIALS + words)}


def encode(line, vocab):
    return [BOS] + [vocab.get(t, UNK) for t in TOKEN.findall(line)] + [EOS]


class PositionalEncoding(nn.Module):
    """The tutorial's table: sin on even, cos on odd coordinates."""

    def __init__(self, dim, max_len=5000):
        super().__init__()
        den = torch.exp(-torch.arange(0, dim, 2) * math.log(10000) / dim)
        pos = torch.arange(max_len).unsqueeze(1)
        table = torch.zeros(max_len, dim)
        table[:, 0::2] = torch.sin(pos * den)
        table[:, 1::2] = torch.cos(pos * den)
        self.register_buffer("table", table)

    def forward(self, x):  # (B, L, C)
        return x + self.table[: x.size(1)]


class TutorialTransformer(nn.Module):
    def __init__(self, src_vocab, tgt_vocab, dim, heads, ffn, enc_layers, dec_layers, norm_first):
        super().__init__()
        self.dim = dim
        self.src_embed = nn.Embedding(src_vocab, dim)
        self.tgt_embed = nn.Embedding(tgt_vocab, dim)
        self.positions = PositionalEncoding(dim)
        self.transformer = nn.Transformer(d_model=dim, nhead=heads, num_encoder_layers=enc_layers,
                                          num_decoder_layers=dec_layers, dim_feedforward=ffn,
                                          dropout=0.0, batch_first=True, norm_first=norm_first)
        self.generator = nn.Linear(dim, tgt_vocab)
        for p in self.parameters():  # the tutorial's initialisation
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)

    def forward(self, src, tgt_in):
        scale = math.sqrt(self.dim)
        length = tgt_in.size(1)
        causal = torch.ones(length, length, dtype=torch.bool).triu(1)  # True: not attended
        out = self.transformer(self.positions(self.src_embed(src) * scale),
                               self.positions(self.tgt_embed(tgt_in) * scale),
                               tgt_mask=causal, src_key_padding_mask=src.eq(PAD),
                               tgt_key_padding_mask=tgt_in.eq(PAD),
                               memory_key_padding_mask=src.eq(PAD))
        return self.generator(out)


def pad(rows):
    width = max(len(r) for r in rows)
    return torch.tensor([r + [PAD] * (width - len(r)) for r in rows])


def batches(src_ids, tgt_ids, size):
    for i in range(0, len(src_ids), size):
        src, tgt = pad(src_ids[i:i + size]), pad(tgt_ids[i:i + size])
        yield src, tgt[:, :-1], tgt[:, 1:]


class FullDataHessian:
    """H v of the token-averaged loss over every batch (each batch's loss weighted by its tokens)."""

    def __init__(self, model, data, eps):
        self.model, self.data = model, data
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.loss = nn.CrossEntropyLoss(ignore_index=PAD, label_smoothing=eps)
        self.tokens = sum(int(out.ne(PAD).sum()) for _, _, out in data)
        self.size = sum(p.numel() for p in self.params)

    def batch_losses(self):
        """Each batch's mean loss times its share of the target tokens: they sum to the loss."""
        for src, tgt_in, tgt_out in self.data:
            with sdpa_kernel(SDPBackend.MATH):  # the CPU flash kernel has no double backward
                logits = self.model(src, tgt_in)
            weight = int(tgt_out.ne(PAD).sum()) / self.tokens
            yield self.loss(logits.reshape(-1, logits.size(-1)), tgt_out.reshape(-1)) * weight

    def gradient(self):
        grads = (torch.autograd.grad(loss, self.params) for loss in self.batch_losses())
        return sum(torch.cat([g.reshape(-1) for g in gs]) for gs in grads)

    def product(self, v):
        parts = torch.split(v, [p.numel() for p in self.params])
        parts = [x.view_as(p) for x, p in zip(parts, self.params)]
        total = torch.zeros_like(v)
        for loss in self.batch_losses():
            grads = torch.autograd.grad(loss, self.params, create_graph=True)
            hv = torch.autograd.grad(grads, self.params, grad_outputs=parts)
            total += torch.cat([h.reshape(-1) for h in hv])
        return total


def lanczos(hvp, size, steps, seed, dtype=torch.float32):
    """Lanczos with full re-orthogonalisation from a Rademacher vector (PyHessian's SLQ start)."""
    gen = torch.Generator().manual_seed(seed)
    v = (torch.randint(0, 2, (size,), generator=gen) * 2 - 1).to(dtype)
    basis = [v / v.norm()]
    alphas, betas = [], []
    for step in range(steps):
        w = hvp(basis[-1])
        alpha = float(w @ basis[-1])
        alphas.append(alpha)
        for q in basis:  # full re-orthogonalisation (twice is enough)
            w -= (w @ q) * q
        for q in basis:
            w -= (w @ q) * q
        beta = float(w.norm())
        ritz = torch.linalg.eigvalsh(tridiagonal(alphas, betas))
        print(f"step {step + 1}/{steps} Ritz [{ritz[0]:.6g}, {ritz[-1]:.6g}]", file=sys.stderr,
              flush=True)
        if step + 1 == steps or beta < 1e-10 * max(1.0, abs(alpha)):
            return ritz, alphas, betas
        betas.append(beta)
        basis.append(w / beta)


def tridiagonal(alphas, betas):
    t = torch.diag(torch.tensor(alphas, dtype=torch.float64))
    for i, b in enumerate(betas[: len(alphas) - 1]):
        t[i, i + 1] = t[i + 1, i] = b
    return t


def self_check(args, vocab, src_ids, tgt_ids):
    """The two parts this measurement rests on, against independent values: the HVP accumulated
    over two batches against central differences of the gradient of the same pairs as one batch
    (a small float64 model of the same construction), and Lanczos against a diagonal matrix with
    a known spectrum."""
    model = TutorialTransformer(len(vocab[args.src]), len(vocab[args.tgt]), 16, 2, 16, 1, 1,
                                args.scheme == "pre-ln").double().eval()
    hessian = FullDataHessian(model, list(batches(src_ids[:6], tgt_ids[:6], 4)), 0.1)
    one_batch = FullDataHessian(model, list(batches(src_ids[:6], tgt_ids[:6], 6)), 0.1)
    gen = torch.Generator().manual_seed(7)
    v = torch.randn(hessian.size, generator=gen, dtype=torch.float64)

    def shift(by):
        with torch.no_grad():
            torch.nn.utils.vector_to_parameters(
                torch.nn.utils.parameters_to_vector(hessian.params) + by, hessian.params)

    h = 1e-5
    shift(h * v)
    plus = one_batch.gradient()
    shift(-2 * h * v)
    minus = one_batch.gradient()
    shift(h * v)
    differences = (plus - minus) / (2 * h)
    product = hessian.product(v)
    hvp_error = float((product - differences).norm() / differences.norm())

    spectrum = torch.cat([torch.linspace(-3, 5, 40, dtype=torch.float64),
                          torch.tensor([7.5, 7.5, -4.25], dtype=torch.float64)])
    ritz, _, _ = lanczos(lambda x: spectrum * x, spectrum.numel(), spectrum.numel(), 3,
                         torch.float64)
    lanczos_error = max(abs(float(ritz[-1]) - 7.5), abs(float(ritz[0]) + 4.25))
    print(f"HVP vs central differences: relative error {hvp_error:.2e}; Lanczos extremes "
          f"{float(ritz[-1]):.12g} / {float(ritz[0]):.12g} vs 7.5 / -4.25")
    return hvp_error < 1e-6 and lanczos_error < 1e-9


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--train", required=True, help="text PREFIX the vocabularies are built from")
    ap.add_argument("--data", required=True, help="text PREFIX of the evaluation pairs")
    ap.add_argument("--src", default="de")
    ap.add_argument("--tgt", default="en")
    ap.add_argument("--sentences", type=int, default=100, help="the first N pairs (0: all)")
    ap.add_argument("--batch", type=int, default=64, help="sentences per batch")
    ap.add_argument("--scheme", choices=["post-ln", "pre-ln"], default="post-ln")
    ap.add_argument("--d-model", type=int, default=512)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--ffn-dim", type=int, default=1024)
    ap.add_argument("--encoder-layers", type=int, default=6)
    ap.add_argument("--decoder-layers", type=int, default=6)
    ap.add_argument("--label-smoothing", type=float, default=0.1)
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", help="write the result as JSON here")
    ap.add_argument("--check", action="store_true",
                    help="check the HVP and Lanczos on small cases instead, exit 1 on failure")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)

    side = {lang: f"{args.train}.{lang}" for lang in (args.src, args.tgt)}
    vocab = {lang: build_vocab(read_lines(path)) for lang, path in side.items()}
    limit = args.sentences or None
    src_ids = [encode(l, vocab[args.src]) for l in read_lines(f"{args.data}.{args.src}", limit)]
    tgt_ids = [encode(l, vocab[args.tgt]) for l in read_lines(f"{args.data}.{args.tgt}", limit)]
    if len(src_ids) != len(tgt_ids):
        sys.exit(f"{args.data}: {len(src_ids)} source lines but {len(tgt_ids)} target lines")

    if args.check:
        sys.exit(0 if self_check(args, vocab, src_ids, tgt_ids) else 1)
    model = TutorialTransformer(len(vocab[args.src]), len(vocab[args.tgt]), args.d_model,
                                args.heads, args.ffn_dim, args.encoder_layers,
                                args.decoder_layers, args.scheme == "pre-ln").eval()
    hessian = FullDataHessian(model, list(batches(src_ids, tgt_ids, args.batch)),
                              args.label_smoothing)
    print(f"vocabularies {args.src} {len(vocab[args.src])}, {args.tgt} {len(vocab[args.tgt])}; "
          f"{hessian.size} parameters, {len(src_ids)} pairs, {hessian.tokens} target tokens",
          file=sys.stderr, flush=True)
    start = time.perf_counter()
    ritz, alphas, betas = lanczos(hessian.product, hessian.size, args.steps, args.seed)
    result = {
        "scheme": args.scheme, "layers": f"{args.encoder_layers}+{args.decoder_layers}",
        "pairs": len(src_ids), "target_tokens": hessian.tokens, "parameters": hessian.size,
        "vocab": {args.src: len(vocab[args.src]), args.tgt: len(vocab[args.tgt])},
        "steps": len(alphas), "lambda_max": float(ritz[-1]), "lambda_min": float(ritz[0]),
        "top5": [float(x) for x in ritz.flip(0)[:5]], "alphas": alphas, "betas": betas,
        "wall_s": time.perf_counter() - start,
    }
    print(json.dumps({k: v for k, v in result.items() if k not in ("alphas", "betas")}))
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
