#!/usr/bin/env python3
"""ctest driver: normlab's initialisations and Admin profiling against ../shared/REFERENCE.md §1.

One case per run (--case), each on float64 models written by `normlab init` and read back
through `normlab export`:
  t-fixup         every parameter of `--scheme t-fixup` divided by the same seed's plain Xavier
                  init (`--norm none --residual plain --init xavier`) is T-Fixup's factor;
  deepnorm        `--scheme deepnorm` divided by `--scheme deepnorm --init xavier` is the ratio
                  of DeepNorm's gains to fairseq's, and weights.json has DeepNorm's alphas;
  xavier          fairseq's initialisation, distributionally, on a larger model;
  admin-profile   the profiled omegas, recomputed with reference_model.py;
  score-batching  `normlab score --batch-sentences 2` equals one batch (loss, nll, gradients).
"""

import argparse
import math
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from check_score import (VOCAB, compare_gradients, deepnorm_constants,  # noqa: E402
                         parse_score_json, run_normlab, write_random_ids)
from reference_model import ReferenceTransformer, load_weights, make_batch  # noqa: E402

# A tiny model with different encoder and decoder depths, so that a factor of the wrong stack
# shows. VOCAB is check_score's, whose write_random_ids writes the id files used here.
TINY = {"d_model": 16, "ffn_dim": 24, "heads": 2, "encoder_layers": 3, "decoder_layers": 2,
        "vocab_size": VOCAB, "share": "decoder"}
SEED = 11
# Ratios of two inits from the same random draws are exact up to rounding.
RATIO_TOLERANCE = 1e-12
SQRT2 = math.sqrt(2.0)


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--normlab", required=True, help="path to the normlab binary")
    parser.add_argument("--workdir", required=True, type=Path)
    parser.add_argument("--case", required=True, choices=sorted(CASES))
    return parser.parse_args()


def init_model(args, tag, sizes, *flags):
    """`normlab init` a float64 model (sizes: flag name -> value); return the checkpoint path."""
    checkpoint = args.workdir / f"{tag}.ckpt"
    size_flags = [item for key, value in sizes.items() for item in (f"--{key.replace('_', '-')}", value)]
    run_normlab(args.normlab, "init", *size_flags, *flags, "--dtype", "float64", "--seed", SEED,
                "--out", checkpoint)
    return checkpoint


def init_export(args, tag, sizes, *flags):
    """init_model, then `normlab export`; return (state, config) of weights.pt / weights.json."""
    weights = args.workdir / f"{tag}.pt"
    run_normlab(args.normlab, "export", "--checkpoint", init_model(args, tag, sizes, *flags), "--out", weights)
    return load_weights(weights)


def stack(name):
    """'encoder' or 'decoder', from a fairseq parameter name."""
    return name.split(".")[0]


def check_ratios(state, base, expected_ratio):
    """state[name] == expected_ratio(name) * base[name] for every parameter and alias.

    Biases must be zero in both. For the rest the test is elementwise, |w - f w_base| <=
    RATIO_TOLERANCE * f * max|w_base| (a plain elementwise ratio would also measure the
    rounding of the uniform draws near zero). Returns (failures, worst deviation).
    """
    failures, worst = [], 0.0
    if set(state) != set(base):
        failures.append(f"parameter names differ: {sorted(set(state) ^ set(base))}")
    for name in sorted(set(state) & set(base)):
        weight, reference = state[name], base[name]
        if name.endswith(".bias"):
            if weight.any() or reference.any():
                failures.append(f"{name} is not zero")
            continue
        factor = expected_ratio(name)
        scale = reference.abs().max().item()
        deviation = (weight - factor * reference).abs().max().item() / (factor * scale) if scale else math.inf
        worst = max(worst, deviation)
        if deviation > RATIO_TOLERANCE:
            fitted = fitted_ratio(weight, reference) if scale else math.nan
            failures.append(f"{name}: ratio {fitted!r}, expected {factor!r} "
                            f"(max deviation {deviation:.2e} of the largest weight)")
    return failures, worst


def fitted_ratio(weight, reference):
    """Least-squares factor of weight ~ f * reference."""
    return ((weight * reference).sum() / (reference * reference).sum()).item()


def t_fixup_ratio(name, n_e, n_d, share):
    """T-Fixup's factor for one parameter, over fairseq's init (REFERENCE §1 "T-Fixup exactly
    as the authors' code"): encoder fc1, fc2, out_proj x 0.67 N_e^(-1/4), v_proj also x sqrt(2);
    decoder (self and cross attention) the same matrices x (9 N_d)^(-1/4); q, k unchanged;
    tables x (9 N)^(-1/4) of their stack, one shared table once by the encoder's factor."""
    layer_factor = {"encoder": 0.67 * n_e ** -0.25, "decoder": (9 * n_d) ** -0.25}[stack(name)]
    encoder_table, decoder_table = (9 * n_e) ** -0.25, (9 * n_d) ** -0.25
    if share == "all":
        decoder_table = encoder_table
    tables = {"encoder.embed_tokens.weight": encoder_table,
              "decoder.embed_tokens.weight": decoder_table,
              # The authors scale embed_tokens only: an unshared output projection is not scaled.
              "decoder.output_projection.weight": 1.0 if share == "none" else decoder_table}
    if name in tables:
        return tables[name]
    if name.endswith("v_proj.weight"):
        return layer_factor * SQRT2  # undoes fairseq's 1/sqrt(2) gain of the fused q/k/v
    if name.endswith(("out_proj.weight", "fc1.weight", "fc2.weight")):
        return layer_factor
    return 1.0


# (encoder layers, decoder layers, --share) of the T-Fixup runs; the 6-layer run has the
# published factors (REFERENCE §1: 0.4281 for the encoder matrices, 0.3689 for the decoder).
T_FIXUP_RUNS = [(3, 2, "decoder"), (3, 2, "none"), (3, 2, "all"), (6, 6, "decoder")]
T_FIXUP_PUBLISHED = {"encoder.layers.0.fc1.weight": 0.4281, "decoder.layers.0.fc1.weight": 0.3689}


def case_t_fixup(args):
    failures, worst, checked = [], 0.0, 0
    for n_e, n_d, share in T_FIXUP_RUNS:
        sizes = dict(TINY, encoder_layers=n_e, decoder_layers=n_d, share=share)
        tag = f"{n_e}-{n_d}-{share}"
        state, _ = init_export(args, f"t-fixup.{tag}", sizes, "--scheme", "t-fixup")
        base, _ = init_export(args, f"xavier.{tag}", sizes,
                              "--norm", "none", "--residual", "plain", "--init", "xavier")
        run_failures, run_worst = check_ratios(state, base, lambda name: t_fixup_ratio(name, n_e, n_d, share))
        failures += [f"{tag}: {failure}" for failure in run_failures]
        worst, checked = max(worst, run_worst), checked + len(state)
        if (n_e, n_d) == (6, 6):
            for name, published in T_FIXUP_PUBLISHED.items():
                measured = fitted_ratio(state[name], base[name])
                if round(measured, 4) != published:
                    failures.append(f"{tag}: {name} ratio {measured:.6f}, published {published}")
    return failures, (f"{len(T_FIXUP_RUNS)} runs, {checked} tensors, worst deviation {worst:.1e}; "
                      f"N=6 factors {0.67 * 6 ** -0.25:.4f} / {54 ** -0.25:.4f}")


def deepnorm_ratio(name, n, m):
    """DeepNorm's Xavier gain over fairseq's (REFERENCE §1 table, docs/schemes.md): q, k gain 1
    over 1/sqrt(2); v_proj beta over 1/sqrt(2); out_proj, fc1, fc2 beta over 1; the rest equal."""
    if "layers." not in name:
        return 1.0
    beta = deepnorm_constants(n, m)[stack(name)][1]
    if name.endswith(("q_proj.weight", "k_proj.weight")):
        return SQRT2
    if name.endswith("v_proj.weight"):
        return beta * SQRT2
    if name.endswith(("out_proj.weight", "fc1.weight", "fc2.weight")):
        return beta
    return 1.0


def case_deepnorm(args):
    n, m = TINY["encoder_layers"], TINY["decoder_layers"]
    state, config = init_export(args, "deepnorm", TINY, "--scheme", "deepnorm")
    base, base_config = init_export(args, "deepnorm-xavier", TINY, "--scheme", "deepnorm", "--init", "xavier")
    failures, worst = check_ratios(state, base, lambda name: deepnorm_ratio(name, n, m))
    # Both inits keep DeepNorm's residual multiplier alpha (docs/schemes.md).
    for label, cfg in (("deepnorm", config), ("deepnorm --init xavier", base_config)):
        for side, (alpha, _) in deepnorm_constants(n, m).items():
            exported = cfg["scheme"][f"{side}_alpha"]
            if not math.isclose(exported, alpha, rel_tol=1e-12):
                failures.append(f"{label}: weights.json scheme.{side}_alpha = {exported!r}, expected {alpha!r}")
    constants = ", ".join(f"{side} alpha {alpha:.6f} beta {beta:.6f}"
                          for side, (alpha, beta) in deepnorm_constants(n, m).items())
    return failures, f"{len(state)} tensors, worst deviation {worst:.1e}; N={n} M={m}: {constants}"


def single_stack_ratio(name, scheme, layers, share, stack):
    """A decoder-only or encoder-only (`stack` decoder or encoder) stack's factor over fairseq's
    init (docs/schemes.md, "Model kinds"):
    T-Fixup (6N)^(-1/4) on out_proj, fc1, fc2, v_proj (times sqrt(2)) and the token table
    (Huang et al. Eq. 7 without the memory terms, |v| = |w| = |y| = (3L)^(-1/4), L = 2N blocks);
    DeepNorm beta = (8N)^(-1/4) as deepnorm_ratio (Wang et al. 2022, Table 1, decoder-only)."""
    if scheme == "deepnorm":
        beta = (8 * layers) ** -0.25
        if "layers." not in name:
            return 1.0
        if name.endswith(("q_proj.weight", "k_proj.weight")):
            return SQRT2
        if name.endswith("v_proj.weight"):
            return beta * SQRT2
        return beta if name.endswith(("out_proj.weight", "fc1.weight", "fc2.weight")) else 1.0
    factor = (6 * layers) ** -0.25
    if name == f"{stack}.embed_tokens.weight":
        return factor
    if name in ("decoder.output_projection.weight", "lm_head.weight"):  # an untied output projection
        return 1.0 if share == "none" else factor
    if name.endswith("v_proj.weight"):
        return factor * SQRT2
    return factor if name.endswith(("out_proj.weight", "fc1.weight", "fc2.weight")) else 1.0


def case_single_stack(args, kind_name):
    """T-Fixup's and DeepNorm's single-stack factors on a decoder-only or encoder-only model."""
    stack, other = ("decoder", "encoder") if kind_name == "decoder-only" else ("encoder", "decoder")
    failures, worst, checked = [], 0.0, 0
    for scheme, layers, share in (("t-fixup", 3, "decoder"), ("t-fixup", 2, "none"), ("deepnorm", 3, "decoder")):
        sizes = dict(TINY, layers=layers, share=share)
        del sizes["encoder_layers"], sizes["decoder_layers"]
        tag = f"{kind_name}.{scheme}.{layers}.{share}"
        kind = ("--model-kind", kind_name)
        state, config = init_export(args, tag, sizes, *kind, "--scheme", scheme)
        plain = ("--scheme", "deepnorm", "--init", "xavier") if scheme == "deepnorm" else (
            "--norm", "none", "--residual", "plain", "--init", "xavier")
        base, _ = init_export(args, tag + ".xavier", sizes, *kind, *plain)
        run_failures, run_worst = check_ratios(state, base,
                                               lambda name: single_stack_ratio(name, scheme, layers, share, stack))
        failures += [f"{tag}: {failure}" for failure in run_failures]
        if any(name.startswith(f"{other}.") for name in state):
            failures.append(f"{tag}: {other} parameters in a {kind_name} model")
        alpha = (2 * layers) ** 0.25 if scheme == "deepnorm" else 1.0
        if not math.isclose(config["scheme"][f"{stack}_alpha"], alpha, rel_tol=1e-12):
            failures.append(f"{tag}: scheme.{stack}_alpha {config['scheme'][f'{stack}_alpha']!r}, expected {alpha!r}")
        worst, checked = max(worst, run_worst), checked + len(state)
    return failures, (f"3 runs, {checked} tensors, worst deviation {worst:.1e}; N=3: T-Fixup {18 ** -0.25:.4f}, "
                      f"DeepNorm alpha {6 ** 0.25:.4f} beta {24 ** -0.25:.4f}")


# fairseq's init on a model large enough for statistics (REFERENCE §1 "Initialisation").
XAVIER_SIZES = {"d_model": 256, "ffn_dim": 512, "heads": 4, "encoder_layers": 1, "decoder_layers": 1,
                "vocab_size": 1000, "share": "none"}
# Relative tolerance of the empirical variance / std. Over >= 65536 draws the standard error
# of a uniform's variance is < 0.4 % and that of a normal's std < 0.2 %.
STATISTICS_TOLERANCE = 0.03


def xavier_gain(name):
    """fairseq: q, k, v gain 1/sqrt(2) (one fused matrix), out_proj and fc gain 1."""
    return 1 / SQRT2 if name.endswith(("q_proj.weight", "k_proj.weight", "v_proj.weight")) else 1.0


def check_xavier_uniform(name, weight, shape=None):
    """U(-a, a), a = gain sqrt(6 / (fan_in + fan_out)): no |w| beyond a, the largest near a
    (as a uniform's is over this many draws), variance a^2 / 3 = gain^2 2 / (fan_in + fan_out).
    `shape`: the whole matrix's, when `weight` holds only some of its rows."""
    fan_out, fan_in = shape if shape is not None else weight.shape
    bound = xavier_gain(name) * math.sqrt(6.0 / (fan_in + fan_out))
    largest, variance = weight.abs().max().item(), weight.var().item()
    failures = []
    if not 0.99 * bound <= largest <= bound * (1 + 1e-12):
        failures.append(f"{name}: max |w| {largest:.6g}, expected just below the bound {bound:.6g}")
    if abs(variance / (bound ** 2 / 3) - 1) > STATISTICS_TOLERANCE:
        failures.append(f"{name}: variance {variance:.6g}, expected {bound ** 2 / 3:.6g}")
    return failures


def check_normal_table(name, weight, dim, pad, zero_padding):
    """N(0, C^-1/2) (std C^-1/2), with the padding row zero for token embeddings only:
    fairseq's unshared output projection (embed_out) is normal_ in every row."""
    rows = torch.ones(weight.size(0), dtype=torch.bool)
    rows[pad] = False
    std, expected = weight[rows].std().item(), dim ** -0.5
    failures = []
    if abs(std / expected - 1) > STATISTICS_TOLERANCE:
        failures.append(f"{name}: std {std:.6g}, expected C^-1/2 = {expected:.6g}")
    if zero_padding and weight[pad].any():
        failures.append(f"{name}: padding row {pad} is not zero")
    if not zero_padding and not weight[pad].any():
        failures.append(f"{name}: padding row {pad} is zero, expected N(0, C^-1/2) like the other rows")
    return failures


def case_xavier(args):
    state, config = init_export(args, "post-ln", XAVIER_SIZES, "--scheme", "post-ln")
    dim, pad, failures = XAVIER_SIZES["d_model"], config["special_tokens"]["pad"], []
    for name, weight in sorted(state.items()):
        if name.endswith("embed_tokens.weight"):
            failures += check_normal_table(name, weight, dim, pad, zero_padding=True)
        elif name.endswith("output_projection.weight"):
            failures += check_normal_table(name, weight, dim, pad, zero_padding=False)
        elif "layer_norm" in name:  # gamma 1, beta 0
            if not torch.equal(weight, torch.full_like(weight, 1.0 if name.endswith(".weight") else 0.0)):
                failures.append(f"{name}: not {'1' if name.endswith('.weight') else '0'}")
        elif name.endswith(".bias"):
            if weight.any():
                failures.append(f"{name} is not zero")
        else:
            failures += check_xavier_uniform(name, weight)
    if config["tied"]:
        failures.append(f"--share none exported aliases {config['tied']}")
    # --embed-init xavier: token tables (padding row still zero) and the unshared output
    # projection Xavier-uniform like the other matrices, which keep the same draws' law.
    state, _ = init_export(args, "embed-xavier", XAVIER_SIZES, "--scheme", "post-ln", "--embed-init", "xavier")
    for name, weight in sorted(state.items()):
        table = name.endswith("embed_tokens.weight")
        if not (table or name.endswith("output_projection.weight")):
            continue
        rows = torch.ones(weight.size(0), dtype=torch.bool)
        rows[pad] = not table
        failures += [f"--embed-init xavier: {f}" for f in check_xavier_uniform(name, weight[rows], weight.shape)]
        if table and weight[pad].any():
            failures.append(f"--embed-init xavier: {name}: padding row {pad} is not zero")
    return failures, f"{len(state)} tensors of a {dim}-{XAVIER_SIZES['ffn_dim']} model, twice"


def flat_var(tensor):
    """Population variance (n, not n - 1) over the whole flattened tensor, as the authors'
    code computes it with np.var (Transformer-Clinic)."""
    return tensor.var(unbiased=False).item()


def profile_admin(model, source, prev_output_tokens):
    """Admin profiling (REFERENCE §1 "Admin profiling") on the reference model: a running r = 1
    per stack; at each residual block in forward order, omega_i = r, then
    r = sqrt(Var(x * omega_i) + Var(drop(f(x)))). Dropout is 0, so drop(f(x)) = f(x).
    Each block's omega is set on entry, so later blocks see the profiled earlier ones.
    Returns omega parameter name -> profiled value."""
    profiled, running = {}, {"encoder": 1.0, "decoder": 1.0}

    def profile_layer(layer, prefix):
        plain_block = layer.block

        def block(x, f, name):
            omega = getattr(layer, f"{name}_omega")
            omega.data.fill_(running[stack(prefix)])
            profiled[f"{prefix}.{name}_omega"] = running[stack(prefix)]
            running[stack(prefix)] = math.sqrt(flat_var(x * omega) + flat_var(f(x)))
            return plain_block(x, f, name)

        layer.block = block  # instance attribute: shadows TransformerLayer.block

    for side in ("encoder", "decoder"):
        for index, layer in enumerate(getattr(model, side).layers):
            profile_layer(layer, f"{side}.layers.{index}")
    with torch.no_grad():
        model(source, prev_output_tokens)
    return profiled


def case_admin_profile(args):
    src_lines, tgt_lines = write_random_ids(args.workdir, seed=SEED)
    state, config = init_export(args, "admin", TINY, "--scheme", "admin", "--dropout", 0,
                                "--profile-src-ids", args.workdir / "src.ids",
                                "--profile-tgt-ids", args.workdir / "tgt.ids")
    model = ReferenceTransformer(config).double().eval()
    model.load_state_dict(state, strict=True)
    special = config["special_tokens"]
    source, prev_output_tokens, _ = make_batch(src_lines, tgt_lines, special["pad"], special["eos"])
    profiled = profile_admin(model, source, prev_output_tokens)

    omegas = {name: tensor for name, tensor in state.items() if name.endswith("_omega")}
    failures, worst = [], 0.0
    if set(omegas) != set(profiled):
        failures.append(f"omega names differ: {sorted(set(omegas) ^ set(profiled))}")
    for name in sorted(set(omegas) & set(profiled)):
        error = ((omegas[name] - profiled[name]).abs().max() / profiled[name]).item()
        worst = max(worst, error)
        if error > 1e-9:
            failures.append(f"{name}: exported {omegas[name].flatten()[:3].tolist()}..., "
                            f"profiled {profiled[name]!r} (relative error {error:.2e})")
    values = " ".join(f"{profiled[name]:.4f}" for name in profiled)
    return failures, f"{len(profiled)} omegas, worst relative error {worst:.1e}: {values}"


def score(args, checkpoint, batch_sentences, grads):
    """`normlab score --json --grad-out` on the id files; return (score JSON, gradients)."""
    stdout = run_normlab(args.normlab, "score", "--checkpoint", checkpoint,
                         "--src-ids", args.workdir / "src.ids", "--tgt-ids", args.workdir / "tgt.ids",
                         "--batch-sentences", batch_sentences, "--json", "--grad-out", grads)
    return parse_score_json(stdout), torch.load(grads, map_location="cpu", weights_only=True)


def case_score_batching(args):
    src_lines, _ = write_random_ids(args.workdir, seed=SEED)
    checkpoint = init_model(args, "post-ln", TINY, "--scheme", "post-ln")
    whole, whole_grads = score(args, checkpoint, len(src_lines), args.workdir / "grads.whole.pt")
    split, split_grads = score(args, checkpoint, 2, args.workdir / "grads.split.pt")
    failures = [f"{key}: one batch {whole[key]!r}, batches of 2 {split[key]!r}"
                for key in ("loss", "nll")
                if abs(split[key] - whole[key]) > 1e-12 * abs(whole[key])]
    if split["tokens"] != whole["tokens"]:
        failures.append(f"tokens: one batch {whole['tokens']}, batches of 2 {split['tokens']}")
    grad_failures, worst, worst_name = compare_gradients(whole_grads, split_grads, tolerance=1e-12)
    return failures + grad_failures, (f"loss {whole['loss']:.12g} vs {split['loss']:.12g}, "
                                      f"worst gradient rel err {worst:.1e} ({worst_name})")


def check_normal_init(state, pad, expected_std):
    """Norms 1 and 0, biases 0, every other tensor N(0, expected_std(name)) (token tables without
    their zero padding row); the std within 5 standard errors (1/sqrt(2n)) and at least
    STATISTICS_TOLERANCE, the mean within 5 standard errors. Returns failure messages."""
    failures = []
    for name, weight in sorted(state.items()):
        if "layer_norm" in name or "layernorm" in name:
            if not torch.equal(weight, torch.full_like(weight, 1.0 if name.endswith(".weight") else 0.0)):
                failures.append(f"{name}: not {'1' if name.endswith('.weight') else '0'}")
            continue
        if name.endswith("bias"):
            if weight.any():
                failures.append(f"{name} is not zero")
            continue
        rows = weight
        if name.endswith("embed_tokens.weight"):
            if weight[pad].any():
                failures.append(f"{name}: padding row {pad} is not zero")
            rows = torch.cat([weight[:pad], weight[pad + 1:]])
        expected, n = expected_std(name), rows.numel()
        tolerance = max(STATISTICS_TOLERANCE, 5 / math.sqrt(2 * n))
        std, mean = rows.std().item(), rows.mean().item()
        if abs(std / expected - 1) > tolerance or abs(mean) > 5 * expected / math.sqrt(n):
            failures.append(f"{name}: mean {mean:.3g}, std {std:.6g}, expected N(0, {expected:.6g})")
    return failures


def case_gpt2(args):
    """GPT-2's init (Hugging Face GPT2PreTrainedModel._init_weights, nanoGPT): every matrix and
    table N(0, 0.02), attention's and the MLP's c_proj (out_proj, fc2) N(0, 0.02 / sqrt(2 n_layer)),
    biases 0, norms 1 and 0; the token table's padding row zero (normlab's)."""
    sizes = dict(XAVIER_SIZES, decoder_layers=3)
    sizes.pop("encoder_layers", None)
    state, config = init_export(args, "gpt2", sizes, "--model-kind", "decoder-only", "--scheme", "pre-ln",
                                "--form", "gpt2")
    layers, failures = sizes["decoder_layers"], []
    if config["scheme"]["init"] != "gpt2":
        failures.append(f"--form gpt2 on pre-ln: init {config['scheme']['init']!r}, expected 'gpt2'")
    branch_std = 0.02 / math.sqrt(2 * layers)
    failures += check_normal_init(state, config["special_tokens"]["pad"],
                                  lambda name: branch_std if name.endswith(("out_proj.weight", "fc2.weight")) else 0.02)
    if "decoder.embed_positions.weight" not in state:
        failures.append("no decoder.embed_positions.weight: --form gpt2 learns its positions")
    return failures, f"{len(state)} tensors of a {layers}-layer GPT-2-form model"


def case_bert(args):
    """BERT's init (Hugging Face BertPreTrainedModel._init_weights): every Linear and table -- tokens,
    positions, segments, the LM head's dense layer -- N(0, 0.02) without GPT-2's residual-branch
    scaling, biases 0 (the LM head's output bias included), norms 1 and 0; the padding row zero."""
    sizes = dict(XAVIER_SIZES, encoder_layers=3)
    sizes.pop("decoder_layers", None)
    state, config = init_export(args, "bert", sizes, "--model-kind", "encoder-only", "--scheme", "post-ln",
                                "--form", "bert")
    failures = []
    if config["scheme"]["init"] != "bert":
        failures.append(f"--form bert on post-ln: init {config['scheme']['init']!r}, expected 'bert'")
    failures += check_normal_init(state, config["special_tokens"]["pad"], lambda name: 0.02)
    for expected in ("encoder.embed_positions.weight", "encoder.segment_embeddings.weight",
                     "encoder.layernorm_embedding.weight", "lm_head.dense.weight"):
        if expected not in state:
            failures.append(f"no {expected} in BERT's form")
    return failures, f"{len(state)} tensors of a {sizes['encoder_layers']}-layer BERT-form model"


CASES = {"t-fixup": case_t_fixup, "deepnorm": case_deepnorm, "xavier": case_xavier,
         "admin-profile": case_admin_profile, "score-batching": case_score_batching,
         "decoder-only": lambda args: case_single_stack(args, "decoder-only"),
         "encoder-only": lambda args: case_single_stack(args, "encoder-only"), "gpt2": case_gpt2, "bert": case_bert}


def main():
    args = parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    failures, summary = CASES[args.case](args)
    if failures:
        print(f"FAIL init/{args.case}:\n  " + "\n  ".join(failures))
        sys.exit(1)
    print(f"OK init/{args.case}: {summary}")


if __name__ == "__main__":
    main()
