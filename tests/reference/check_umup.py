#!/usr/bin/env python3
"""ctest driver: normlab's u-muP (`--parametrisation u-mup`, docs/width.md) against Graphcore's
`unit-scaling` package 0.3.5 (Blake et al. 2024, arXiv 2407.17465), issue 36 §1.

The u-muP side is the package's, never normlab's numbers: a decoder-only Pre-LN model written here
from the package's modules and functions (uu.Embedding, uu.Linear, uu.LayerNorm, uu.LinearReadout,
uu.DepthModuleList, U.add, U.gelu, U.scaled_dot_product_attention, U.residual_split/residual_add
with transformer_residual_scaling_rule(), U.cross_entropy), with normlab's parameter names and
layout (GPT-2's form: learned positions, biases, affine LayerNorms, GELU-tanh; an untied readout).
  forward   normlab's float64 initial checkpoint loaded into it: `normlab score` of a batch of equal
            length lines (no padding) against the package's summed cross-entropy (relative 1e-9), at
            the default alphas and at ALPHAS (u-muP's Table 3 hyperparameters, `--umup-alpha-*`, each
            the `mult` of the package function it is passed to here).
  gradient  the package scales its backward pass apart from the forward, by constants per tensor
            (docs/width.md, "u-muP"): every gradient `normlab score --grad-out` writes must be
            parallel to the package's (1 - cosine < 1e-12), its norm ratio recorded, not compared.
  lr        uu.optim.Adam's and AdamW's param_groups (lr_scale_func_adam, depth from the
            DepthModuleList) against normlab's: one `train --max-steps 1` update at lr L from the
            same seed as one at 1e-30 moves each element by lr_i g/(|g| + eps), max over a tensor
            lr_i (float32: relative LR_TOLERANCE).
  init      normlab's initialisation at width INIT_WIDTH against the package's modules' (normal_
            with std 1 for every Linear, Embedding, LinearReadout weight): each tensor's std within
            INIT_Z standard errors of 1; biases 0 and norm gains 1 as the package's modules start.
"""

import argparse
import math
import sys
from pathlib import Path

import torch
from torch import nn

try:
    import unit_scaling as uu
    import unit_scaling.functional as U
    from unit_scaling.core.functional import transformer_residual_scaling_rule
except ImportError:  # scripts/install-deps installs it (unit-scaling==0.3.5, --no-deps)
    sys.exit("FAIL: the `unit_scaling` package is missing: run scripts/install-deps")

sys.path.insert(0, str(Path(__file__).resolve().parent))
from check_score import run_normlab, parse_score_json  # noqa: E402
from reference_model import load_weights, make_batch  # noqa: E402

VOCAB, WIDTH, FFN, HEADS, LAYERS, POSITIONS = 41, 32, 64, 2, 3, 64
LINES, LINE_LENGTH = 4, 11       # equal lengths: no padding (the package's attention has no mask)
TOLERANCE = 1e-9                 # float64 loss
COSINE_TOLERANCE = 1e-12         # float64 gradients, up to a constant per tensor
LR, LR_TINY = 1e-2, 1e-30
LR_TOLERANCE = 1e-3              # as check_mup.py: float32 resolves lr_i to ~1e-6 relative
INIT_WIDTH, INIT_VOCAB, INIT_Z = 128, 1000, 6.0
DEFAULT_ALPHAS = {"ffn-act": 1.0, "attn-softmax": 1.0, "res": 1.0, "res-attn-ratio": 1.0, "loss-softmax": 1.0}
ALPHAS = {"ffn-act": 1.7, "attn-softmax": 0.6, "res": 1.4, "res-attn-ratio": 0.7, "loss-softmax": 2.3}
MODEL = ["--model-kind", "decoder-only", "--scheme", "pre-ln", "--form", "gpt2", "--share", "none",
         "--parametrisation", "u-mup", "--heads", HEADS, "--layers", LAYERS, "--max-positions", POSITIONS,
         "--dropout", 0]


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--normlab", required=True, help="path to the normlab binary")
    parser.add_argument("--workdir", required=True, type=Path)
    parser.add_argument("--data", type=Path, help="the shared data folder (multi30k/val.en.gz: the lr check's "
                                                 "training text); without it that check is skipped")
    return parser.parse_args()


# --------------------------------------------------------------------------- the package's model

class Attention(nn.Module):
    def __init__(self, width, heads, alphas):
        super().__init__()
        self.heads = heads
        self.mult = alphas["attn-softmax"]
        for name in ("q_proj", "k_proj", "v_proj", "out_proj"):
            setattr(self, name, uu.Linear(width, width, bias=True))

    def forward(self, x):
        batch, length, width = x.shape

        def heads(t):  # normlab's split: head h is columns [h D, (h + 1) D)
            return t.view(batch, length, self.heads, width // self.heads).transpose(1, 2)

        q, k, v = (heads(p(x)) for p in (self.q_proj, self.k_proj, self.v_proj))
        context = U.scaled_dot_product_attention(q, k, v, is_causal=True, mult=self.mult)
        return self.out_proj(context.transpose(1, 2).reshape(batch, length, width))


class Layer(nn.Module):
    def __init__(self, width, ffn, heads, index, layers, alphas):
        super().__init__()
        rule = transformer_residual_scaling_rule(alphas["res"], alphas["res-attn-ratio"])  # u-muP's Appendix G
        self.attn_tau, self.ffn_tau = rule(2 * index, 2 * layers), rule(2 * index + 1, 2 * layers)
        self.ffn_act = alphas["ffn-act"]
        self.self_attn = Attention(width, heads, alphas)
        self.self_attn_layer_norm = uu.LayerNorm(width, elementwise_affine=True)
        self.fc1 = uu.Linear(width, ffn, bias=True)
        self.fc2 = uu.Linear(ffn, width, bias=True)
        self.final_layer_norm = uu.LayerNorm(width, elementwise_affine=True)

    def forward(self, x):
        residual, skip = U.residual_split(x, tau=self.attn_tau)
        x = U.residual_add(self.self_attn(self.self_attn_layer_norm(residual)), skip, tau=self.attn_tau)
        residual, skip = U.residual_split(x, tau=self.ffn_tau)
        h = U.gelu(self.fc1(self.final_layer_norm(residual)), mult=self.ffn_act, approximate="tanh")
        return U.residual_add(self.fc2(h), skip, tau=self.ffn_tau)


class Decoder(nn.Module):
    def __init__(self, vocab, width, ffn, heads, layers, positions, alphas):
        super().__init__()
        self.embed_tokens = uu.Embedding(vocab, width)
        self.embed_positions = uu.Embedding(positions, width)
        self.layers = uu.DepthModuleList([Layer(width, ffn, heads, i, layers, alphas) for i in range(layers)])
        self.layer_norm = uu.LayerNorm(width, elementwise_affine=True)
        self.output_projection = uu.LinearReadout(width, vocab)

    def forward(self, tokens):
        positions = torch.arange(tokens.shape[1])
        x = U.add(self.embed_tokens(tokens), self.embed_positions(positions).unsqueeze(0))
        for layer in self.layers:
            x = layer(x)
        return self.output_projection(self.layer_norm(x))


class PackageModel(nn.Module):
    def __init__(self, **sizes):
        super().__init__()
        self.decoder = Decoder(**sizes)


def package_model(width, vocab=VOCAB, ffn=FFN, alphas=None):
    return PackageModel(vocab=vocab, width=width, ffn=ffn, heads=HEADS, layers=LAYERS, positions=POSITIONS,
                        alphas=alphas or DEFAULT_ALPHAS)


def alpha_options(alphas):
    return [item for name, value in alphas.items() for item in (f"--umup-alpha-{name}", value)]


# ---------------------------------------------------------------------------------- the checks

def token_lines():
    generator = torch.Generator().manual_seed(3)
    return [torch.randint(4, VOCAB, (LINE_LENGTH,), generator=generator).tolist() for _ in range(LINES)]


def check_forward(args):
    """(failures, lines): check_forward_at the default alphas and at ALPHAS."""
    failures, lines = [], []
    for tag, alphas in (("default", DEFAULT_ALPHAS), ("alphas", ALPHAS)):
        f, out = check_forward_at(args, tag, alphas)
        failures += f
        lines += [f"{tag} {line}" for line in out]
    return failures, lines


def check_forward_at(args, tag, alphas):
    """(failures, lines): loss and gradient directions of normlab's initial model with `alphas`."""
    work = args.workdir / tag
    work.mkdir(parents=True, exist_ok=True)
    checkpoint, weights, grads_path = work / "model.ckpt", work / "weights.pt", work / "grads.pt"
    run_normlab(args.normlab, "init", *MODEL, *alpha_options(alphas), "--d-model", WIDTH, "--ffn-dim", FFN,
                "--vocab-size", VOCAB, "--seed", 7, "--dtype", "float64", "--out", checkpoint)
    run_normlab(args.normlab, "export", "--checkpoint", checkpoint, "--out", weights)
    lines = token_lines()
    (work / "tgt.ids").write_text("".join(" ".join(map(str, ids)) + "\n" for ids in lines))
    score = parse_score_json(run_normlab(args.normlab, "score", "--checkpoint", checkpoint, "--tgt-ids",
                                         work / "tgt.ids", "--label-smoothing", 0, "--json", "--grad-out", grads_path))
    state, config = load_weights(weights)
    if config["model"].get("parametrisation") != "u-mup":
        return [f"weights.json says parametrisation {config['model'].get('parametrisation')!r}, not u-mup"], []
    model = package_model(WIDTH, alphas=alphas).double()
    model.load_state_dict(state, strict=True)
    special = config["special_tokens"]
    _, prev_output_tokens, target = make_batch([[] for _ in lines], lines, special["pad"], special["eos"])
    logits = model.decoder(prev_output_tokens)
    loss = U.cross_entropy(logits.flatten(0, 1), target.flatten(), reduction="sum", mult=alphas["loss-softmax"])
    loss.backward()
    failures = []
    error = abs(score["loss"] - loss.item()) / loss.item()
    if error > TOLERANCE:
        failures.append(f"loss: normlab {score['loss']!r}, the package's {loss.item()!r} (relative {error:.2e})")
    grads = torch.load(grads_path, map_location="cpu")
    worst, worst_name, ratios = 0.0, None, []
    for name, param in model.named_parameters():
        if name.endswith("k_proj.bias"):  # analytically zero (check_score.py)
            continue
        ours, theirs = grads[name].flatten(), param.grad.flatten()
        cosine = (ours @ theirs / (ours.norm() * theirs.norm())).item()
        ratios.append(theirs.norm().item() / ours.norm().item())
        if 1 - cosine > worst:
            worst, worst_name = 1 - cosine, name
    if worst > COSINE_TOLERANCE:
        failures.append(f"gradient of {worst_name}: 1 - cosine with the package's {worst:.2e}")
    return failures, [f"forward: loss {score['loss']:.10g} vs the package's {loss.item():.10g} ({error:.1e}); "
                      f"gradients parallel to the package's within 1 - cos {worst:.1e} ({worst_name}); the "
                      f"package's per-tensor gradient scale / the true gradient's: {min(ratios):.3g} .. {max(ratios):.3g}"]


def trained(args, common, tag, optimizer, lr):
    out = args.workdir / tag
    run_normlab(args.normlab, "train", *common, "--optimizer", optimizer, "--lr", lr, "--out", out)
    return torch.load(out / "checkpoints" / "checkpoint_1_1.pt", map_location="cpu", weights_only=False)


def check_lr(args):
    """normlab's per-parameter Adam/AdamW lr against unit_scaling.optim's."""
    text = args.data / "multi30k" / "val.en.gz" if args.data else None
    if text is None or not text.exists():
        return [], [f"SKIP lr: no training text under {args.data}"]
    common = [*MODEL, "--d-model", WIDTH, "--ffn-dim", FFN, "--train", text, "--valid", text, "--vocab-size", 300,
              "--block-size", 32, "--max-tokens", 400, "--max-steps", 1, "--save-interval-updates", 1,
              "--lr-schedule", "constant", "--warmup-steps", 0, "--seed", 5, "--threads", 1, "--device", "cpu"]
    before = trained(args, common, "lr-initial", "adam", LR_TINY)
    vocab = before["decoder.embed_tokens.weight"].shape[0]
    model = package_model(WIDTH, vocab=vocab)
    names = {id(p): name for name, p in model.named_parameters()}
    failures, lines = [], []
    for optimizer, make in (("adam", uu.optim.Adam), ("adamw", uu.optim.AdamW)):
        groups = make(model.parameters(), lr=LR).param_groups
        expected = {names[id(p)]: group["lr"] / LR for group in groups for p in group["params"]}
        after = trained(args, common, f"lr-{optimizer}", optimizer, LR)
        worst, worst_name, values = 0.0, None, set()
        for name, multiplier in sorted(expected.items()):
            if name.endswith("k_proj.bias"):
                continue
            measured = (after[name].double() - before[name].double()).abs().max().item() / LR
            error = abs(measured - multiplier) / multiplier
            values.add(round(multiplier, 6))
            if error > worst:
                worst, worst_name = error, name
            if error > LR_TOLERANCE:
                failures.append(f"{optimizer} lr of {name}: unit_scaling gives {multiplier:.6g} x lr, normlab's "
                                f"first update {measured:.6g} x lr")
        lines.append(f"lr {optimizer}: {len(expected)} tensors, multipliers {sorted(values)}; worst relative "
                     f"error {worst:.1e} ({worst_name})")
    return failures, lines


def check_init(args):
    """Each tensor's initial statistics against the package's modules' at INIT_WIDTH."""
    checkpoint, weights = args.workdir / "init.ckpt", args.workdir / "init.pt"
    run_normlab(args.normlab, "init", *MODEL, "--d-model", INIT_WIDTH, "--ffn-dim", 2 * INIT_WIDTH,
                "--vocab-size", INIT_VOCAB, "--seed", 11, "--out", checkpoint)
    run_normlab(args.normlab, "export", "--checkpoint", checkpoint, "--out", weights)
    state, _ = load_weights(weights)
    package = package_model(INIT_WIDTH, vocab=INIT_VOCAB, ffn=2 * INIT_WIDTH).state_dict()
    failures, worst = [], 0.0
    for name, theirs in package.items():
        ours = state[name].double()
        if name == "decoder.embed_tokens.weight":
            ours = ours[torch.arange(ours.shape[0]) != 1]  # normlab's padding row stays 0 (docs/width.md)
        if theirs.dim() >= 2:  # the package draws N(0, 1): the sample std within INIT_Z standard errors
            z = abs(ours.std().item() - 1.0) / math.sqrt(0.5 / ours.numel())
            worst = max(worst, z)
            if z > INIT_Z:
                failures.append(f"init {name}: std {ours.std().item():.4f}, the package's modules draw std 1 ({z:.1f} s.e.)")
        elif not torch.equal(ours, theirs.double()):
            failures.append(f"init {name}: normlab's differs from the package's constant {theirs.flatten()[0].item()}")
    return failures, [f"init at width {INIT_WIDTH}: {len(package)} tensors, matrices' std within {worst:.1f} s.e. of 1"]


def main():
    args = parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    torch.set_default_dtype(torch.float64)
    failures, lines = [], []
    for check in (check_forward, check_lr, check_init):
        f, out = check(args)
        failures += f
        lines += out
    print("\n".join(lines))
    if failures:
        sys.exit("FAIL: " + "\n".join(failures))
    print("PASS: normlab's u-muP agrees with the unit-scaling package")


if __name__ == "__main__":
    main()
