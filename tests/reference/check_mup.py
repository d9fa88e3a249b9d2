#!/usr/bin/env python3
"""ctest driver: normlab's muP (`--parametrisation mup`, docs/width.md) against Microsoft's `mup`
package 1.0.0 (Yang et al. 2021, "Tensor Programs V"), issue 36 §1.

The muP side is derived by the package, never from normlab's numbers: reference_model.py's model
of the normlab checkpoint at width C, the same class at the base width C0 and at a delta width
(2 C0), `mup.set_base_shapes(model, base, delta=delta)`, the package's readout modules
(`MuReadout`, `MuSharedReadout` for a table tied to the output) in place of the reference's. Then:
  lr        `mup.MuAdam` / `mup.MuAdamW` (lr L) give each parameter's learning rate. normlab's is
            seen from outside: `normlab train --optimizer adam|adamw --max-steps 1` at lr L and
            at lr 1e-30 (the initial weights) from the same seed; the first Adam step moves every
            element by lr_i g/(|g| + eps), so max |w_1 - w_0| over a tensor is lr_i (float32:
            `train` has no float64; relative tolerance LR_TOLERANCE). `mup.MuSGD`'s: one update of
            `--optimizer sgd` with `--trace-steps 1` on every parameter, whose histograms of the
            gradient and of the update (w_1 - w_0) over 0.1-decade bins of log10 |.| are the same
            elements shifted by log10 lr_i: the mean bin shift over the elements is log10 lr_i to
            a fraction of a bin (SGD_TOLERANCE decades). Weight decay: each parameter's decay per
            update (lr_i x weight_decay_i) of MuAdamW and MuSGD with weight_decay W, against the
            difference between one update with `--weight-decay W` and one without.
  forward   the reference with the package's multipliers, attention q.k x 1/sqrt(D0) / m (the
            1/d attention of Yang et al. §J.1 with the fan-in width_mult m of q_proj's infshape:
            sqrt(D0)/D, the README's "8/d") and the readout input x output_mult / width_mult()
            read off the package's MuReadout (its forward checked to be that product), against
            `normlab score` of the same float64 mup checkpoint: loss, nll and every gradient
            (relative error < 1e-6). weights.json's own `attention_scale` and
            `readout_multiplier` (normlab export) must equal the package's to 1e-12; the
            reference is given the package's.
  init      at two widths (2 C0 and 4 C0): the package's initialisation of the reference
            (`mup.init.xavier_uniform_` with fairseq's gains for the hidden matrices,
            `mup.init.normal_` with the base width's std for tables, the sp draw of an untied
            readout, then `set_base_shapes(rescale_params=True)`) against normlab's `init`: the
            std of every random tensor within INIT_Z combined standard errors of the two samples,
            zero biases and unit norms equal.
Departures normlab documents (docs/width.md, "Where normlab's layout differs") are encoded below
in DEPARTURES, by name, and each is checked to hold as documented.
"""

import argparse
import copy
import csv
import math
import shutil
import sys
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

try:
    import mup
except ImportError:  # scripts/install-deps installs it (mup==1.0.0, --no-deps)
    sys.exit("FAIL: the `mup` package is missing: run scripts/install-deps")

sys.path.insert(0, str(Path(__file__).resolve().parent))
from check_score import (VOCAB, compare_gradients, parse_score_json, reference_score,  # noqa: E402
                         run_normlab, write_random_ids)
from reference_model import ReferenceTransformer, load_weights  # noqa: E402

# (model kind, scheme, --share) per ctest case reference.mup.<case>.
CASES = {
    "encoder-decoder.pre-ln": ("encoder-decoder", "pre-ln", "decoder"),   # tied: MuSharedReadout
    "decoder-only.pre-ln": ("decoder-only", "pre-ln", "none"),            # untied: MuReadout
    "encoder-only.post-ln": ("encoder-only", "post-ln", "decoder"),       # RoBERTa's head, tied, with bias
}
# The forward and lr model: width C = 4 C0.
BASE, WIDTH, HEADS, LAYERS = 16, 64, 2, 2
FFN_RATIO = 2
TOLERANCE = 1e-6          # float64 forward and gradients, as check_score.py
LR = 1e-2                 # Adam's lr L of the one-update runs
LR_TINY = 1e-30           # the run that keeps the initial weights (`train` refuses lr 0)
# The first Adam step is lr_i g/(|g| + 1e-8) per element: its largest |g| in a tensor is far above
# eps, and float32 resolves w_1 - w_0 of a weight below 4 to 5e-7 / (L / m): 1e-3 leaves room; the
# hypotheses differ by m = 4.
LR_TOLERANCE = 1e-3
SGD_LR = 1.0              # SGD's lr of its one-update run
# --weight-decay W of the decay runs: a decay of L W = 1e-2 (AdamW) and 1e-2 (SGD) of each weight
# per update, which float32 resolves to ~1e-5 relative over a tensor; a missing multiplier is off
# by m = 4.
WD_ADAMW, WD_SGD = 1.0, 0.01
WD_TOLERANCE = 1e-3
# The mean bin shift averages each element's floor(x + log10 lr_i) - floor(x) over its fractional
# parts (measured: within 0.006 decade on tensors of 64 elements); 0.02 decade is 4.7%, while m = 4
# is 0.6 decade (m = 2: 0.3).
SGD_TOLERANCE = 0.02
# The init statistics: C0 = 32 and widths 64, 128 with a 1000-token vocabulary (16k to 128k draws
# per tensor; the relative standard error of a sample std is sqrt((kurtosis - 1) / 4n), 0.55% for a
# normal of 16k). INIT_Z combined standard errors: a false alarm below 1e-8 per tensor, while a
# wrong rule is off by sqrt(2) or more.
INIT_BASE, INIT_WIDTHS, INIT_VOCAB, INIT_HEADS = 32, (64, 128), 1000, 2
INIT_Z = 6.0

# normlab's documented departures from the package (docs/width.md), each checked as such.
DEPARTURES = {
    "embed-scale-frozen": "fairseq's sqrt(C) token multiplier, a width-dependent constant the package "
                          "does not have, is frozen at sqrt(C0): weights.json embed_scale = sqrt(C0)",
    "tied-table-not-rescaled": "MuSharedReadout under set_base_shapes(rescale_params=True) multiplies the "
                               "shared table by sqrt(m); normlab initialises a tied table once, as a table: "
                               "its std is the package's / sqrt(m)",
    "no-zero-init": "the optional zero init of the readout (MuReadout readout_zero_init, off by default) and "
                    "of the query (the example's in_proj_weight[:d] = 0) is not applied: the package's "
                    "readouts are built with readout_zero_init=False and normlab's q_proj and readouts "
                    "must be nonzero",
}


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--normlab", required=True, help="path to the normlab binary")
    parser.add_argument("--workdir", required=True, type=Path)
    parser.add_argument("--case", required=True, choices=sorted(CASES))
    parser.add_argument("--data", type=Path, help="the shared data folder (multi30k/val): the lr check's "
                                                 "training text; without it that check is skipped")
    return parser.parse_args()


# ---------------------------------------------------------------- the package's view of the model

def at_width(config, d_model):
    """weights.json's dict with d_model and the FFN scaled to `d_model` (the base or delta model)."""
    out = copy.deepcopy(config)
    model = out["model"]
    model["ffn_dim"] = model["ffn_dim"] * d_model // model["d_model"]
    model["d_model"] = d_model
    return out


def readout_of(model):
    """(the module holding the readout, its weight, its bias or None, whether it is tied)."""
    if hasattr(model, "lm_head"):
        head = model.lm_head
        return head, head.weight, head.bias, head.weight is model.encoder.embed_tokens.weight
    out = model.decoder.output_projection
    return model.decoder, out.weight, None, out.weight is model.decoder.embed_tokens.weight


def with_package_readout(model):
    """Put mup's readout module on `model`'s readout weight (and bias), the Parameters shared, so
    that set_base_shapes sees a MuReadout (its assert_hidden_size_inf refuses a plain Linear from
    the width to the vocabulary) and rescales it. A decoder's output_projection is replaced by it;
    an LM head (a weight and a bias, no Linear) gets it as child `mup_readout`: parameter names and
    the reference's forward do not change. readout_zero_init False: DEPARTURES["no-zero-init"]."""
    holder, weight, bias, tied = readout_of(model)
    vocab, dim = weight.shape
    if tied:
        readout = mup.MuSharedReadout(weight, bias=bias is not None, readout_zero_init=False)
    else:
        readout = mup.MuReadout(dim, vocab, bias=bias is not None, readout_zero_init=False)
        readout.weight = weight
    if bias is not None:
        readout.bias = bias
    readout.to(weight.dtype)
    if hasattr(model, "lm_head"):
        holder.mup_readout = readout
    else:
        holder.output_projection = readout
    return readout


def package_model(config):
    """reference_model.py's model of `config` (float64) with the package's readout and base shapes
    (rescale_params=False: the weights are normlab's, or drawn next): base at weights.json's
    mup_base_width C0, delta at 2 C0. Returns (model, its readout module, base, delta)."""
    c0 = config["model"]["mup_base_width"]
    models = []
    for cfg in (config, at_width(config, c0), at_width(config, 2 * c0)):
        m = ReferenceTransformer(cfg).double()
        with_package_readout(m)
        models.append(m)
    model, base, delta = models
    mup.set_base_shapes(model, base, delta=delta, rescale_params=False)
    return model, readout_of_package(model), base, delta


def readout_of_package(model):
    return model.lm_head.mup_readout if hasattr(model, "lm_head") else model.decoder.output_projection


def package_multipliers(model, readout):
    """(attention scale, readout multiplier) from the package's infshapes and MuReadout."""
    attention = next(mod for mod in model.modules() if hasattr(mod, "q_proj"))
    fan_in = attention.q_proj.weight.infshape[1]          # InfDim(C0, C)
    m_attn = fan_in.width_mult()
    d0 = attention.head_dim / m_attn
    attention_scale = 1.0 / math.sqrt(d0) / m_attn        # "1/d", equal to 1/sqrt(D) at C0
    return attention_scale, readout.output_mult / readout.width_mult()


def names_by_id(model):
    return {id(p): name for name, p in model.named_parameters()}


def package_groups(model, optimizer, lr, weight_decay=0.0):
    """(name, its param_group) for every parameter, from the package optimiser's param_groups."""
    names = names_by_id(model)
    make = {"adam": mup.MuAdam, "adamw": mup.MuAdamW, "sgd": mup.MuSGD}[optimizer]
    opt = make(model.parameters(), lr=lr, weight_decay=weight_decay)
    return [(names[id(p)], group) for group in opt.param_groups for p in group["params"]]


def package_lr_multipliers(model, optimizer):
    """name -> the package optimiser's lr over L, from its param_groups."""
    return {name: group["lr"] / LR for name, group in package_groups(model, optimizer, LR)}


def infinite_dims(model):
    return {name: p.infshape.ninf() for name, p in model.named_parameters()}


# ------------------------------------------------------------------------------ (a) learning rates

def train_args(kind, scheme, share, prefix):
    if kind == "encoder-decoder":
        data = ["--train", prefix, "--valid", prefix, "--src", "de", "--tgt", "en",
                "--encoder-layers", LAYERS, "--decoder-layers", LAYERS, "--max-pairs", 300]
    else:
        data = ["--model-kind", kind, "--train", prefix + ".en.gz", "--valid", prefix + ".en.gz",
                "--layers", LAYERS, "--block-size", 32, "--max-positions", 64]
    return [*data, "--scheme", scheme, "--share", share, "--vocab-size", 300,
            "--d-model", WIDTH, "--ffn-dim", FFN_RATIO * WIDTH, "--heads", HEADS,
            "--parametrisation", "mup", "--mup-base-width", BASE, "--dropout", 0, "--max-tokens", 400,
            "--max-steps", 1, "--save-interval-updates", 1, "--lr-schedule", "constant",
            "--warmup-steps", 0, "--seed", 5, "--threads", 1, "--device", "cpu"]


def trained(args, common, tag, optimizer, lr):
    out = args.workdir / tag
    run_normlab(args.normlab, "train", *common, "--optimizer", optimizer, "--lr", lr, "--out", out)
    checkpoint = out / "checkpoints" / "checkpoint_1_1.pt"
    return checkpoint, torch.load(checkpoint, map_location="cpu", weights_only=False)


class Tally:
    """One check's per-tensor relative errors: the worst, and the tensors per (infinite dims, expected)."""

    def __init__(self):
        self.worst, self.worst_name, self.counts = 0.0, None, {}

    def add(self, name, ninf, want, measured):
        error = abs(measured - want) / want
        self.counts[(ninf, want)] = self.counts.get((ninf, want), 0) + 1
        if error > self.worst:
            self.worst, self.worst_name = error, name
        return error

    def line(self, title):
        groups = ", ".join(f"{n} with {k} infinite dims x {v:g}" for (k, v), n in sorted(self.counts.items()))
        return f"{title}: {groups}; worst relative error {self.worst:.1e} ({self.worst_name})"


def check_lr(args, kind, scheme, share):
    """normlab's per-parameter Adam/AdamW lr against MuAdam's/MuAdamW's; returns (failures, lines)."""
    prefix = args.data / "multi30k" / "val" if args.data else None
    if prefix is None or not Path(str(prefix) + ".de.gz").exists():
        return [], [f"SKIP lr: no training text under {args.data}"]
    common = train_args(kind, scheme, share, str(prefix))
    checkpoint, before = trained(args, common, "lr-initial", "adam", LR_TINY)
    weights = args.workdir / "trained.pt"
    run_normlab(args.normlab, "export", "--checkpoint", checkpoint, "--out", weights)
    _, config = load_weights(weights)
    model = package_model(config)[0]
    ninf = infinite_dims(model)
    failures, lines = [], []
    for optimizer in ("adam", "adamw"):
        expected = package_lr_multipliers(model, optimizer)
        _, after = trained(args, common, f"lr-{optimizer}", optimizer, LR)
        tally = Tally()
        for name, multiplier in sorted(expected.items()):
            if name.endswith("k_proj.bias"):  # analytically zero gradient (check_score.py): no sign to step by
                continue
            if name not in after or name not in before:
                failures.append(f"{optimizer}: {name} missing from normlab's checkpoint")
                continue
            step = (after[name].double() - before[name].double()).abs().max().item()
            measured = step / LR
            if tally.add(name, ninf[name], multiplier, measured) > LR_TOLERANCE:
                failures.append(f"{optimizer} lr of {name} ({ninf[name]} infinite dims): mup's Mu"
                                f"{'AdamW' if optimizer == 'adamw' else 'Adam'} gives {multiplier:g} x lr, "
                                f"normlab's first update {measured:.6g} x lr")
        lines.append(tally.line(f"lr {optimizer}"))
    sgd_failures, line = check_sgd(args, common, package_lr_multipliers(model, "sgd"), ninf)
    wd_failures, wd_lines = check_weight_decay(args, common, model, ninf, before)
    return failures + sgd_failures + wd_failures, lines + [line] + wd_lines


def check_weight_decay(args, common, model, ninf, before):
    """Each parameter's decay per update, lr_i x weight_decay_i, against the package's param_groups
    (MuAdamW and MuSGD with weight_decay W). From outside: one update with --weight-decay W and one
    without from the same start; AdamW's p (1 - lr_i wd_i) - lr_i u and SGD's p - lr_i (g + wd_i p)
    differ from the undecayed update by lr_i wd_i p_0, read as the least-squares slope over the
    tensor's elements (tensors of zeros at the start, the biases, carry none and are skipped).
    Adam's L2 decay (in the gradient, then normalised) is not visible in one update: not checked
    here; it takes the same per-parameter multiplier (Optimizer::set_weight_decay_scales)."""
    failures, lines = [], []
    for optimizer, lr, wd in (("adamw", LR, WD_ADAMW), ("sgd", SGD_LR, WD_SGD)):
        expected = {name: group["lr"] * group["weight_decay"] / (lr * wd)
                    for name, group in package_groups(model, optimizer, lr, wd)}
        _, plain = trained(args, common, f"wd0-{optimizer}", optimizer, lr)
        _, decayed = trained(args, common + ["--weight-decay", wd], f"wd-{optimizer}", optimizer, lr)
        tally = Tally()
        for name, want in sorted(expected.items()):
            p0 = before[name].double()  # the start, to 1e-30 (lr-initial's step)
            if p0.abs().max().item() < 1e-6:  # zeros at the start (biases): no decay to see
                continue
            measured = ((plain[name].double() - decayed[name].double()) * p0).sum().item() / (p0 * p0).sum().item()
            measured /= lr * wd
            if tally.add(name, ninf[name], want, measured) > WD_TOLERANCE:
                failures.append(f"{optimizer} weight decay of {name} ({ninf[name]} infinite dims): the package's "
                                f"lr x weight_decay is {want:g} x (L W), normlab's update decays by {measured:.6g} x (L W)")
        lines.append(tally.line(f"weight decay {optimizer}: lr_i wd_i / (L W)"))
    return failures, lines


def log_histograms(path):
    """(param, kind) -> {bin index k: count} of trace/histograms.csv's bins [k/10, (k+1)/10) of
    log10 |v| (docs/probe.md); the zero and the two open-ended bins left out."""
    out = {}
    with open(path, encoding="utf-8") as f:
        for row in csv.DictReader(f):
            if {row["bin_lo"], row["bin_hi"]} & {"inf", "-inf"}:
                continue
            out.setdefault((row["param"], row["kind"]), {})[round(float(row["bin_lo"]) * 10)] = int(row["count"])
    return out


def mean_bin(histogram):
    return sum(k * n for k, n in histogram.items()) / sum(histogram.values())


def check_sgd(args, common, expected, ninf):
    """normlab's SGD lr per parameter (first update / gradient, from the trace's log histograms)
    against MuSGD's."""
    names = [n for n in sorted(expected) if not n.endswith("k_proj.bias")]  # zero gradient (above)
    out = args.workdir / "lr-sgd"
    run_normlab(args.normlab, "train", *common, "--optimizer", "sgd", "--lr", SGD_LR, "--trace-steps", 1,
                "--trace-params", ",".join(names), "--out", out)
    histograms = log_histograms(out / "trace" / "histograms.csv")
    failures, worst, worst_name, counts = [], 0.0, None, {}
    for name in names:
        grad, update = histograms.get((name, "grad")), histograms.get((name, "update"))
        if not grad or not update:
            failures.append(f"sgd: no gradient or update histogram of {name} in the trace")
            continue
        measured = (mean_bin(update) - mean_bin(grad)) / 10  # log10 of lr_i
        want = math.log10(SGD_LR * expected[name])
        counts[(ninf[name], expected[name])] = counts.get((ninf[name], expected[name]), 0) + 1
        if abs(measured - want) > worst:
            worst, worst_name = abs(measured - want), name
        if abs(measured - want) > SGD_TOLERANCE:
            failures.append(f"sgd lr of {name} ({ninf[name]} infinite dims): mup's MuSGD gives {expected[name]:g} x "
                            f"lr, normlab's first update / gradient {10 ** measured / SGD_LR:.4g} x lr")
    groups = ", ".join(f"{n} with {k} infinite dims x {v:g}" for (k, v), n in sorted(counts.items()))
    return failures, f"lr sgd: {groups}; worst |log10 error| {worst:.4f} ({worst_name})"


# ------------------------------------------------------------------------------------ (b) forward

def init_score_model(args, kind, scheme, share):
    """A float64 mup model of width WIDTH (base BASE) from `normlab init`, exported and scored."""
    w = args.workdir
    checkpoint, weights, grads = w / "model.ckpt", w / "weights.pt", w / "grads.pt"
    layers = (["--layers", LAYERS] if kind != "encoder-decoder"
              else ["--encoder-layers", LAYERS, "--decoder-layers", LAYERS])
    run_normlab(args.normlab, "init", "--model-kind", kind, "--scheme", scheme, "--share", share, *layers,
                "--d-model", WIDTH, "--ffn-dim", FFN_RATIO * WIDTH, "--heads", HEADS, "--vocab-size", VOCAB,
                "--parametrisation", "mup", "--mup-base-width", BASE, "--seed", 7, "--dtype", "float64",
                "--out", checkpoint)
    run_normlab(args.normlab, "export", "--checkpoint", checkpoint, "--out", weights)
    src_lines, tgt_lines = write_random_ids(w, 20240611, kind == "encoder-only")
    source = [] if kind == "decoder-only" else ["--src-ids", w / "src.ids"]
    stdout = run_normlab(args.normlab, "score", "--checkpoint", checkpoint, *source, "--tgt-ids", w / "tgt.ids",
                         "--label-smoothing", 0.1, "--ls-formula", "uniform", "--json", "--grad-out", grads)
    return parse_score_json(stdout), weights, grads, src_lines, tgt_lines


def check_forward(args, kind, scheme, share):
    score, weights, grads_path, src_lines, tgt_lines = init_score_model(args, kind, scheme, share)
    state, config = load_weights(weights)
    grads = torch.load(grads_path, map_location="cpu", weights_only=True)
    failures = []
    model = config["model"]
    if model.get("parametrisation") != "mup" or model.get("mup_base_width") != BASE:
        failures.append(f"weights.json model.parametrisation/mup_base_width = {model.get('parametrisation')!r}/"
                        f"{model.get('mup_base_width')!r}, expected 'mup'/{BASE}")
    # DEPARTURES["embed-scale-frozen"]: the package would leave fairseq's sqrt(C) (a constant it does
    # not know) at sqrt(C); normlab freezes it at sqrt(C0).
    if not math.isclose(config["embed_scale"], math.sqrt(BASE), rel_tol=1e-12):
        failures.append(f"weights.json embed_scale = {config['embed_scale']!r}, expected sqrt(C0) = "
                        f"{math.sqrt(BASE)!r} ({DEPARTURES['embed-scale-frozen']})")
    package, readout, _, _ = package_model(config)
    missing, unexpected = package.load_state_dict(state, strict=False)
    if unexpected or any(".mup_readout." not in name for name in missing):  # an LM head's readout: aliases
        failures.append(f"the package's model does not load weights.pt: missing {missing}, unexpected {unexpected}")
    attention_scale, readout_multiplier = package_multipliers(package, readout)
    # The package's MuReadout forward is F.linear(output_mult x / width_mult, W, b): the multiplier.
    x = torch.randn(3, readout.weight.shape[1], dtype=torch.float64)
    direct = F.linear(readout_multiplier * x, readout.weight, readout.bias)
    if not torch.allclose(readout(x), direct, rtol=1e-14, atol=0):
        failures.append("the package's MuReadout forward is not F.linear(output_mult / width_mult x, W, b)")
    # DEPARTURES["no-zero-init"]: the query and the readout are drawn, not zeroed.
    zero = [n for n, t in state.items() if (n.endswith("q_proj.weight") or n == readout_name(config)) and not t.any()]
    if zero:
        failures.append(f"zero-initialised {zero} ({DEPARTURES['no-zero-init']})")
    # weights.json says both multipliers (normlab export): they must be the package's.
    for key, want in (("attention_scale", attention_scale), ("readout_multiplier", readout_multiplier)):
        if not (key in config and math.isclose(config[key], want, rel_tol=1e-12)):
            failures.append(f"weights.json {key} = {config.get(key)!r}, the package's {want!r}")
    mup_config = dict(config, attention_scale=attention_scale, readout_multiplier=readout_multiplier)
    loss, nll, tokens, ref_grads, _ = reference_score(state, mup_config, src_lines, tgt_lines, "uniform")
    for what, ours, theirs in (("loss", score["loss"], loss), ("nll", score["nll"], nll)):
        if abs(ours - theirs) >= TOLERANCE * abs(theirs):
            failures.append(f"{what}: normlab {ours!r}, reference with the package's multipliers {theirs!r}")
    if score["tokens"] != tokens:
        failures.append(f"tokens: normlab {score['tokens']}, reference {tokens}")
    grad_failures, worst, worst_name = compare_gradients(ref_grads, grads)
    failures += grad_failures
    # Without the multipliers (sp's forward on the same weights) the loss must differ: the check sees them.
    sp_config = {k: v for k, v in config.items() if k not in ("attention_scale", "readout_multiplier")}
    sp_loss = reference_score(state, sp_config, src_lines, tgt_lines, "uniform")[0]
    if abs(sp_loss - loss) < 100 * TOLERANCE * abs(loss):
        failures.append(f"the multipliers do not change the loss ({sp_loss!r} without, {loss!r} with)")
    line = (f"forward: attention x {attention_scale:.6g} (1/sqrt(D) = {1 / math.sqrt(WIDTH // HEADS):.6g}), "
            f"readout input x {readout_multiplier:g} (m = {WIDTH // BASE}); loss {loss:.10g} rel err "
            f"{abs(score['loss'] - loss) / abs(loss):.1e} (sp forward {sp_loss:.6g}), {len(ref_grads)} gradients, "
            f"worst rel err {worst:.1e} ({worst_name})")
    return failures, [line]


def readout_name(config):
    if config["model"].get("kind") == "encoder-only":
        return "lm_head.weight"
    return "decoder.output_projection.weight"


# --------------------------------------------------------------------------------------- (c) init

# fairseq's Xavier gains (REFERENCE §1; check_init.py's xavier_gain): the sp rule that the
# package's drop-in init must reproduce at the base width.
def sp_gain(name):
    return 2 ** -0.5 if name.endswith(("q_proj", "k_proj", "v_proj")) else 1.0


@torch.no_grad()
def package_init(config, seed):
    """The package's initialisation of the reference at config's width: set_base_shapes for the
    infshapes, the drop-in inits, then set_base_shapes(rescale_params=True) as a package user runs
    it after building the model (examples/Transformer/main.py). Returns {stored name: tensor}."""
    torch.manual_seed(seed)
    model, readout, base, delta = package_model(config)
    c, c0 = config["model"]["d_model"], config["model"]["mup_base_width"]
    pad = config["special_tokens"]["pad"]
    readout_weight = readout.weight
    for name, module in model.named_modules():
        if isinstance(module, mup.MuReadout):
            continue
        if isinstance(module, nn.Linear):  # hidden matrices: mup.init's Xavier, gain fairseq's
            mup.init.xavier_uniform_(module.weight, gain=sp_gain(name))
            nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):  # vector-like: a width-free std, the base width's sp rule
            mup.init.normal_(module.weight, std=c0 ** -0.5)
            module.weight[pad].zero_()
        elif isinstance(module, nn.LayerNorm):
            nn.init.ones_(module.weight)
            nn.init.zeros_(module.bias)
    if not any(readout_weight is m.weight for m in model.modules() if isinstance(m, nn.Embedding)):
        nn.init.normal_(readout_weight, std=c ** -0.5)  # an untied readout: the sp draw, rescaled below
    if readout.bias is not None:
        nn.init.zeros_(readout.bias)
    # As a package user does after building the model: readouts x sqrt(m), Linear biases x
    # sqrt(fan-in m) (examples/Transformer/main.py calls set_base_shapes after the model's init).
    mup.set_base_shapes(model, base, delta=delta, rescale_params=True)
    return {name: p.detach().clone() for name, p in model.named_parameters()}, infinite_dims(model)


def relative_std_error(t):
    """Standard error of a sample std over its value: sqrt((kurtosis - 1) / (4 n))."""
    x = t.flatten().double()
    x = x - x.mean()
    kurtosis = (x ** 4).mean() / (x ** 2).mean() ** 2
    return math.sqrt(max(kurtosis.item() - 1, 0.0) / (4 * x.numel()))


def check_init(args, kind, scheme, share):
    failures, lines = [], []
    for width in INIT_WIDTHS:
        for init_share in sorted({share, "none"}):
            tag = f"init-{width}-{init_share}"
            checkpoint, weights = args.workdir / f"{tag}.ckpt", args.workdir / f"{tag}.pt"
            layers = ["--layers", 1] if kind != "encoder-decoder" else ["--encoder-layers", 1, "--decoder-layers", 1]
            run_normlab(args.normlab, "init", "--model-kind", kind, "--scheme", scheme, "--share", init_share,
                        *layers, "--d-model", width, "--ffn-dim", FFN_RATIO * width, "--heads", INIT_HEADS,
                        "--vocab-size", INIT_VOCAB, "--parametrisation", "mup", "--mup-base-width", INIT_BASE,
                        "--seed", 3, "--dtype", "float64", "--out", checkpoint)
            run_normlab(args.normlab, "export", "--checkpoint", checkpoint, "--out", weights)
            state, config = load_weights(weights)
            expected, ninf = package_init(config, seed=width)
            m = width / INIT_BASE
            pad = config["special_tokens"]["pad"]
            tied_tables = set(config["tied"].values())
            worst, worst_name, checked = 0.0, None, 0
            for name, theirs in sorted(expected.items()):
                ours = state[name]
                if theirs.shape != ours.shape:
                    failures.append(f"{tag}: {name} shape {tuple(ours.shape)}, package {tuple(theirs.shape)}")
                    continue
                if not theirs.std() > 0:  # zero biases, unit norms: equal
                    if not torch.equal(ours, theirs):
                        failures.append(f"{tag}: {name} is not the package's constant {theirs.flatten()[0].item()}")
                    continue
                if name.endswith("embed_tokens.weight"):  # the padding row is zero in both
                    keep = torch.ones(ours.shape[0], dtype=torch.bool)
                    keep[pad] = False
                    ours, theirs = ours[keep], theirs[keep]
                want = theirs.std().item()
                departure = ""
                if name in tied_tables:  # DEPARTURES["tied-table-not-rescaled"]
                    want /= math.sqrt(m)
                    departure = " after tied-table-not-rescaled (/ sqrt(m))"
                got = ours.std().item()
                tolerance = INIT_Z * math.hypot(relative_std_error(ours), relative_std_error(theirs))
                error = abs(got / want - 1)
                checked += 1
                if error / tolerance > worst:
                    worst, worst_name = error / tolerance, f"{name} ({got:.5g} vs {want:.5g})"
                if error > tolerance:
                    failures.append(f"{tag}: init std of {name} ({ninf[name]} infinite dims): package "
                                    f"{want:.6g}{departure}, normlab {got:.6g} (ratio {got / want:.4f}, "
                                    f"tolerance {tolerance:.2%})")
            lines.append(f"init C={width} (m={m:g}) share {init_share}: {checked} random tensors, worst "
                         f"|ratio - 1| at {worst:.2f} of its tolerance: {worst_name}")
    return failures, lines


def main():
    args = parse_args()
    shutil.rmtree(args.workdir, ignore_errors=True)  # a run left there would be "complete" and reused
    args.workdir.mkdir(parents=True, exist_ok=True)
    kind, scheme, share = CASES[args.case]
    failures, lines = [], []
    for check in (check_forward, check_lr, check_init):
        f, l = check(args, kind, scheme, share)
        failures += f
        lines += l
    print(f"{args.case} (C0 {BASE}, C {WIDTH}; init C0 {INIT_BASE}, C {INIT_WIDTHS}):")
    print("  departures encoded: " + "; ".join(DEPARTURES))
    for line in lines:
        print("  " + line)
    if failures:
        print(f"FAIL {args.case}: {len(failures)} disagreements with the mup package\n  " + "\n  ".join(failures))
        sys.exit(1)
    print(f"OK {args.case}")


if __name__ == "__main__":
    main()
