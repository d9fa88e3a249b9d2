#!/usr/bin/env python3
"""ctest driver: normlab's summed loss and every parameter gradient against the reference.

Builds a small float64 model with `normlab init`, exports it, scores a seeded random batch with
`normlab score --grad-out`, recomputes loss, nll, token count and gradients with
reference_model.py (eval mode: no dropout) and fails unless they agree to relative error
< 1e-6. It also checks that the exported configuration is the requested scheme and that the
model is non-trivial (no all-zero weight matrix, gradients reach every parameter).

With --precision bf16 (mixed precision, REFERENCE §7) the model is float32 and scored with
`normlab score --precision bf16`; its loss and gradients are compared with the float64
reference, and must be as close to it as PyTorch AMP's (the float32 reference under
torch.autocast("cpu", torch.bfloat16), logits taken to float32 for the loss as fairseq does),
within a factor BF16_FACTOR, and farther than float32 rounding (else bf16 was not used).
"""

import argparse
import json
import math
import random
import subprocess
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from reference_model import ReferenceTransformer, label_smoothed_loss, load_weights, make_batch, pad_rows  # noqa: E402

VOCAB = 37
D_MODEL, FFN_DIM, HEADS, ENCODER_LAYERS, DECODER_LAYERS = 16, 24, 2, 2, 3
LABEL_SMOOTHING = 0.1
TOLERANCE = 1e-6
BF16_FACTOR = 3.0    # normlab bf16's error against float64, at most this multiple of AMP's
FP32_ROUNDING = 1e-5  # a bf16 run's error must exceed this (fp32 alone stays near 1e-7)
# Sentence lengths (source, target) of the test batch: from 1 to 9, so the batch is padded
# on both sides and the shortest sentences are a single token.
LENGTHS = [(9, 4), (1, 9), (5, 1), (3, 6), (7, 2), (2, 8)]
# normlab --scheme -> (norm placement, residual form, norm kind, LayerNorm scaling) in
# weights.json (conv "Layers" table, docs/schemes.md).
SCHEME_FORMS = {
    "post-ln": ("post", "plain", "layernorm", False), "pre-ln": ("pre", "plain", "layernorm", False),
    "t-fixup": ("none", "plain", "layernorm", False), "admin": ("post", "admin", "layernorm", False),
    "rezero": ("none", "rezero", "layernorm", False), "deepnorm": ("post", "deepnorm", "layernorm", False),
    "peri-ln": ("peri", "plain", "layernorm", False), "mix-ln": ("mix", "plain", "layernorm", False),
    "dyt": ("pre", "plain", "dyt", False), "rmsnorm-pre": ("pre", "plain", "rmsnorm", False),
    "lns": ("pre", "plain", "layernorm", True),
}
SCHEME_KEYS = ("norm", "residual", "norm_kind", "ln_scaling")
# The stored name of the shared table and its aliases (conv "Shared embeddings").
EXPECTED_TIED = {
    "all": {"decoder.embed_tokens.weight": "encoder.embed_tokens.weight",
            "decoder.output_projection.weight": "encoder.embed_tokens.weight"},
    "decoder": {"decoder.output_projection.weight": "decoder.embed_tokens.weight"},
    "none": {},
}
# An encoder-only model's one table and its LM head (conv "Model kinds").
EXPECTED_TIED_ENCODER_ONLY = {"decoder": {"lm_head.weight": "encoder.embed_tokens.weight"}, "none": {}}


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--normlab", required=True, help="path to the normlab binary")
    parser.add_argument("--workdir", required=True, type=Path)
    parser.add_argument("--scheme", required=True, choices=sorted(SCHEME_FORMS))
    parser.add_argument("--share", default="decoder", choices=sorted(EXPECTED_TIED))
    parser.add_argument("--formula", default="uniform", choices=["uniform", "exclusive"])
    parser.add_argument("--init", help="passed to `normlab init --init`")
    parser.add_argument("--rezero-alpha-init", type=float,
                        help="passed to `normlab init`; a nonzero alpha makes the layers visible")
    parser.add_argument("--norm-kind", choices=["layernorm", "rmsnorm", "dyt"],
                        help="passed to `normlab init` (overrides the scheme's)")
    parser.add_argument("--mix-ln-alpha", type=float, help="passed to `normlab init`")
    parser.add_argument("--qk-norm", action="store_true", help="passed to `normlab init`")
    parser.add_argument("--form", choices=["fairseq", "gpt2", "bert"], help="passed to `normlab init`")
    parser.add_argument("--z-loss", type=float, default=0.0,
                        help="passed to `normlab score`: the loss also holds C (log Z)^2 per token")
    parser.add_argument("--seed", type=int, default=20240611, help="seed of the random ids")
    parser.add_argument("--model-kind", default="encoder-decoder",
                        choices=["encoder-decoder", "decoder-only", "encoder-only"],
                        help="decoder-only: DECODER_LAYERS layers, scored on tgt.ids alone; encoder-only: "
                             "ENCODER_LAYERS layers, src.ids masked inputs and tgt.ids their targets")
    parser.add_argument("--precision", default="fp32", choices=["fp32", "bf16"],
                        help="bf16: normlab's mixed precision against PyTorch AMP")
    return parser.parse_args()


IGNORE = -100  # an encoder-only target line's "nothing to predict here" (Hugging Face's ignore index)


def masked_lines(rng):
    """An encoder-only model's lines of lengths LENGTHS' sources: inputs x with about a third of it
    replaced (by <mask> = VOCAB - 1, or a random id) and the targets: the original id at each
    replaced position and at one kept position per line, -100 elsewhere (conv "Tokens")."""
    inputs, targets = [], []
    for n, _ in LENGTHS:
        given = [rng.randrange(4, VOCAB - 1) for _ in range(n)]
        target = [IGNORE] * n
        for j in range(n):
            if j == 0 or rng.random() < 0.35:
                target[j] = given[j]
                if j > 0:
                    given[j] = VOCAB - 1 if rng.random() < 0.8 else rng.randrange(4, VOCAB - 1)
        inputs.append(given)
        targets.append(target)
    return inputs, targets


def write_random_ids(workdir, seed, encoder_only=False):
    """Write src.ids / tgt.ids (one sentence per line, ids in [4, VOCAB)); return the id lists."""
    rng = random.Random(seed)
    pairs = [([rng.randrange(4, VOCAB) for _ in range(n)], [rng.randrange(4, VOCAB) for _ in range(m)])
             for n, m in LENGTHS]
    src_lines, tgt_lines = masked_lines(rng) if encoder_only else [list(side) for side in zip(*pairs)]
    for name, lines in (("src.ids", src_lines), ("tgt.ids", tgt_lines)):
        (workdir / name).write_text("".join(" ".join(map(str, ids)) + "\n" for ids in lines))
    return src_lines, tgt_lines


def run_normlab(binary, *args):
    """Run one normlab sub-command; exit the test with its output if it fails."""
    command = [binary, *map(str, args)]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"FAIL: {' '.join(command)} exited with {result.returncode}\n"
                 f"{result.stdout}{result.stderr}")
    return result.stdout


def normlab_score(args):
    """init, export and score with normlab; return its score JSON and the paths it wrote."""
    workdir = args.workdir
    checkpoint, weights, grads = workdir / "model.ckpt", workdir / "weights.pt", workdir / "grads.pt"
    decoder_only = args.model_kind == "decoder-only"
    layers = {"decoder-only": ["--layers", DECODER_LAYERS], "encoder-only": ["--layers", ENCODER_LAYERS]}.get(
        args.model_kind, ["--encoder-layers", ENCODER_LAYERS, "--decoder-layers", DECODER_LAYERS])
    init = ["init", "--model-kind", args.model_kind, "--scheme", args.scheme, "--d-model", D_MODEL,
            "--ffn-dim", FFN_DIM, "--heads", HEADS, *layers,
            "--vocab-size", VOCAB, "--share", args.share, "--seed", 7,
            "--dtype", "float64" if args.precision == "fp32" else "float32",
            "--out", checkpoint]
    if args.init:
        init += ["--init", args.init]
    if args.rezero_alpha_init is not None:
        init += ["--rezero-alpha-init", args.rezero_alpha_init]
    if args.norm_kind:
        init += ["--norm-kind", args.norm_kind]
    if args.mix_ln_alpha is not None:
        init += ["--mix-ln-alpha", args.mix_ln_alpha]
    if args.qk_norm:
        init += ["--qk-norm"]
    if args.form:
        init += ["--form", args.form]
    run_normlab(args.normlab, *init)
    run_normlab(args.normlab, "export", "--checkpoint", checkpoint, "--out", weights)
    source = [] if decoder_only else ["--src-ids", workdir / "src.ids"]
    stdout = run_normlab(args.normlab, "score", "--checkpoint", checkpoint,
                         *source, "--tgt-ids", workdir / "tgt.ids",
                         "--label-smoothing", LABEL_SMOOTHING, "--ls-formula", args.formula,
                         "--json", "--grad-out", grads, "--precision", args.precision,
                         "--z-loss", args.z_loss)
    return parse_score_json(stdout), weights, grads


def parse_score_json(stdout):
    """The {"loss", "nll", "tokens"} line that `normlab score --json` prints."""
    json_lines = [line for line in stdout.splitlines() if line.startswith("{")]
    if not json_lines:
        sys.exit(f"FAIL: `normlab score --json` printed no JSON line:\n{stdout}")
    return json.loads(json_lines[-1])


def check_config(config, state, args):
    """The exported model is the one requested; return a list of failure messages."""
    failures = []
    model, scheme = config["model"], config["scheme"]
    decoder_only = args.model_kind == "decoder-only"
    encoder_only = args.model_kind == "encoder-only"
    expected = {"d_model": D_MODEL, "ffn_dim": FFN_DIM, "heads": HEADS,
                "encoder_layers": 0 if decoder_only else ENCODER_LAYERS,
                "decoder_layers": 0 if encoder_only else DECODER_LAYERS,
                "src_vocab_size": VOCAB, "tgt_vocab_size": VOCAB, "share_embeddings": args.share}
    failures += [f"weights.json model.{key} = {model.get(key)!r}, expected {value!r}"
                 for key, value in expected.items() if model.get(key) != value]
    form = dict(zip(SCHEME_KEYS, SCHEME_FORMS[args.scheme]))
    if args.norm_kind:
        form["norm_kind"] = args.norm_kind
    form["qk_norm"] = args.qk_norm
    form["mix_ln_alpha"] = args.mix_ln_alpha if args.mix_ln_alpha is not None else 0.25
    failures += [f"weights.json scheme.{key} = {scheme.get(key)!r} for --scheme {args.scheme}, expected {value!r}"
                 for key, value in form.items() if scheme.get(key) != value]
    if model.get("kind", "encoder-decoder") != args.model_kind:
        failures.append(f"weights.json model.kind = {model.get('kind')!r}, expected {args.model_kind!r}")
    if args.form == "gpt2":  # GPT-2's form (docs/schemes.md, "Forms")
        form_keys = {"positions": "learned", "activation": "gelu-tanh", "scale_embedding": False}
        failures += [f"weights.json model.{key} = {model.get(key)!r} for --form gpt2, expected {value!r}"
                     for key, value in form_keys.items() if model.get(key) != value]
        if config["embed_scale"] != 1.0:
            failures.append(f"weights.json embed_scale = {config['embed_scale']} for --form gpt2, expected 1")
    if args.form == "bert":  # BERT's form (docs/schemes.md, "Forms")
        form_keys = {"positions": "learned", "activation": "gelu", "scale_embedding": False,
                     "embedding_norm": True, "segment_types": 2}
        failures += [f"weights.json model.{key} = {model.get(key)!r} for --form bert, expected {value!r}"
                     for key, value in form_keys.items() if model.get(key) != value]
    tied = (EXPECTED_TIED_ENCODER_ONLY if encoder_only else EXPECTED_TIED)[args.share]
    if config["tied"] != tied:
        failures.append(f"weights.json tied = {config['tied']}, expected {tied}")
    if encoder_only and config.get("mask_token") != VOCAB - 1:
        failures.append(f"weights.json mask_token = {config.get('mask_token')}, expected the last id {VOCAB - 1}")
    failures += [f"weights.pt alias {alias} differs from {stored}"
                 for alias, stored in config["tied"].items()
                 if alias in state and stored in state and not torch.equal(state[alias], state[stored])]
    failures += [f"weights.pt {name} has dtype {tensor.dtype}, expected float64"
                 for name, tensor in state.items() if tensor.dtype != torch.float64]
    failures += [f"weights.pt {name} is all zero" for name, tensor in state.items()
                 if tensor.dim() == 2 and not tensor.any()]
    return failures + check_scheme_constants(config, state, args)


def deepnorm_constants(n, m):
    """DeepNorm's (alpha, beta) per stack for N encoder and M decoder layers (REF 1):
    encoder 0.81 (N^4 M)^(1/16), 0.87 (N^4 M)^(-1/16); decoder (3M)^(1/4), (12M)^(-1/4)."""
    return {"encoder": (0.81 * (n ** 4 * m) ** (1 / 16), 0.87 * (n ** 4 * m) ** (-1 / 16)),
            "decoder": ((3 * m) ** 0.25, (12 * m) ** -0.25)}


def single_stack_deepnorm(m):
    """DeepNorm's (alpha, beta) for a decoder-only stack of M layers (Wang et al. 2022,
    Table 1): (2M)^(1/4), (8M)^(-1/4)."""
    return (2 * m) ** 0.25, (8 * m) ** -0.25


def check_scheme_constants(config, state, args):
    """Scheme constants that enter the forward pass (REF 1); return failure messages."""
    scheme, failures = config["scheme"], []
    n, m = ENCODER_LAYERS, DECODER_LAYERS
    decoder_only = args.model_kind == "decoder-only"
    encoder_only = args.model_kind == "encoder-only"
    alphas = {"decoder": 1.0} if decoder_only else {"encoder": 1.0} if encoder_only else {"encoder": 1.0, "decoder": 1.0}
    if scheme["residual"] == "deepnorm":
        alphas = ({"decoder": single_stack_deepnorm(m)[0]} if decoder_only else
                  {"encoder": single_stack_deepnorm(n)[0]} if encoder_only else
                  {side: alpha for side, (alpha, _) in deepnorm_constants(n, m).items()})
    if decoder_only and "encoder_alpha" in scheme:
        failures.append("weights.json scheme.encoder_alpha for a model without an encoder")
    if encoder_only and "decoder_alpha" in scheme:
        failures.append("weights.json scheme.decoder_alpha for a model without a decoder")
    for side, value in alphas.items():
        if not math.isclose(scheme[f"{side}_alpha"], value, rel_tol=1e-12):
            failures.append(f"weights.json scheme.{side}_alpha = {scheme[f'{side}_alpha']}, expected {value}")
    if args.init == "admin-closed-form":  # omega = sqrt((N+1)/ln(N+1) - 1), N residual sub-layers
        sublayers = {"encoder": 2 * n, "decoder": 2 * m if decoder_only else 3 * m}
        for name, tensor in state.items():
            if name.endswith("_omega"):
                count = sublayers[name.split(".")[0]]
                omega = math.sqrt((count + 1) / math.log(count + 1) - 1)
                if not torch.allclose(tensor, torch.full_like(tensor, omega), rtol=1e-12, atol=0):
                    failures.append(f"{name} = {tensor.flatten()[:3].tolist()}..., expected the "
                                    f"closed form {omega} (N = {count} sub-layers)")
    if args.rezero_alpha_init is not None:
        failures += [f"{name} = {tensor.item()}, expected --rezero-alpha-init {args.rezero_alpha_init}"
                     for name, tensor in state.items()
                     if name.endswith("rezero_alpha") and tensor.item() != args.rezero_alpha_init]
    return failures


def reference_score(state, config, src_lines, tgt_lines, formula, amp=False, z_loss=0.0):
    """Loss, nll, tokens and gradients (stored names) of the reference model in float64, or
    with `amp` in float32 under bf16 autocast (the two lines a PyTorch user adds)."""
    model = ReferenceTransformer(config).eval()
    model = model.float() if amp else model.double()
    model.load_state_dict(state, strict=True)
    special = config["special_tokens"]
    if config["model"].get("kind") == "encoder-only":  # rows <s> x, targets pad then the line's (-100: pad)
        pad = special["pad"]
        source = pad_rows([[special["bos"]] + x for x in src_lines], pad)
        target = pad_rows([[pad] + [pad if t == IGNORE else t for t in y] for y in tgt_lines], pad)
        prev_output_tokens = source[:, :0]
    else:
        source, prev_output_tokens, target = make_batch(src_lines, tgt_lines, special["pad"], special["eos"])
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp):
        logits = model(source, prev_output_tokens)
    logits = logits.float() if amp else logits
    loss, nll, tokens = label_smoothed_loss(logits, target, LABEL_SMOOTHING, formula, special["pad"])
    if z_loss:  # PaLM's z-loss: C (log Z)^2 per non-padding target token
        log_z = torch.logsumexp(logits, dim=-1)[target.ne(special["pad"])]
        loss = loss + z_loss * (log_z ** 2).sum()
    loss.backward()
    grads = {name: param.grad for name, param in model.named_parameters()}
    return loss.item(), nll.item(), tokens, grads, model.tied_aliases()


def relative_error(reference, value):
    return (reference - value).norm().item() / max(reference.norm().item(), 1e-12)


def compare_gradients(ref_grads, grads, tolerance=TOLERANCE, zero_suffix="k_proj.bias"):
    """Return (failures, worst relative error, worst name). Parameters named `*zero_suffix`
    have an analytically zero gradient."""
    failures = []
    if set(ref_grads) != set(grads):
        failures.append(f"gradient names differ: only in reference {sorted(set(ref_grads) - set(grads))}, "
                        f"only in normlab {sorted(set(grads) - set(ref_grads))}")
    total = math.sqrt(sum(g.norm().item() ** 2 for g in ref_grads.values()))
    worst, worst_name, zero = 0.0, None, []
    for name in sorted(set(ref_grads) & set(grads)):
        ref, grad = ref_grads[name], grads[name]
        if grad.shape != ref.shape or grad.dtype != torch.float64:
            failures.append(f"gradient {name}: {grad.dtype} {tuple(grad.shape)}, expected "
                            f"float64 {tuple(ref.shape)}")
            continue
        if name.endswith(zero_suffix):
            # Analytically zero (softmax is invariant to the constant q.b_k added to a row of
            # scores; with QK-norm the bias after the norm, k_norm.bias, is the one added to
            # every key), so only rounding noise is left: compare with the overall gradient norm.
            if max(ref.norm().item(), grad.norm().item()) > 1e-10 * total:
                failures.append(f"gradient {name} should be zero: |ref| {ref.norm().item():.3e}, "
                                f"|normlab| {grad.norm().item():.3e}")
            continue
        if not ref.any():
            zero.append(name)
        error = relative_error(ref, grad)
        if error >= worst:
            worst, worst_name = error, name
    if zero:
        failures.append(f"{len(zero)} parameters have a zero reference gradient, so the test does "
                        f"not exercise them: {', '.join(zero[:4])}{', ...' if len(zero) > 4 else ''}")
    if worst >= tolerance:
        failures.append(f"gradient {worst_name}: relative error {worst:.3e} >= {tolerance:g} "
                        f"(|ref| {ref_grads[worst_name].norm().item():.6e}, "
                        f"|normlab| {grads[worst_name].norm().item():.6e})")
    return failures, worst, worst_name


def flat(grads, names):
    return torch.cat([grads[n].double().flatten() for n in names])


def check_mixed_precision(score, grads, state, config, src_lines, tgt_lines, args):
    """normlab bf16 against float64, as close as PyTorch AMP is; return (failures, summary)."""
    exact = reference_score(state, config, src_lines, tgt_lines, args.formula)
    amp = reference_score(state, config, src_lines, tgt_lines, args.formula, amp=True)
    names = sorted(exact[3])
    failures = [f"normlab gradient {n} is {grads[n].dtype}, expected float32 (master weights)"
                for n in names if grads[n].dtype != torch.float32]
    rel = lambda value, reference: abs(value - reference) / abs(reference)
    errors = {  # (normlab's, AMP's) relative error against float64
        "loss": (rel(score["loss"], exact[0]), rel(amp[0], exact[0])),
        "nll": (rel(score["nll"], exact[1]), rel(amp[1], exact[1])),
        "gradients": (relative_error(flat(exact[3], names), flat(grads, names)),
                      relative_error(flat(exact[3], names), flat(amp[3], names))),
    }
    for what, (ours, theirs) in errors.items():
        if ours > BF16_FACTOR * max(theirs, FP32_ROUNDING):
            failures.append(f"{what}: normlab bf16 relative error {ours:.2e} against float64, PyTorch AMP's "
                            f"{theirs:.2e}: more than {BF16_FACTOR:g}x")
    if errors["gradients"][0] < FP32_ROUNDING:
        failures.append(f"gradients: relative error {errors['gradients'][0]:.2e} against float64 is float32 "
                        "rounding: the products did not run in bf16")
    if score["tokens"] != exact[2]:
        failures.append(f"tokens: normlab {score['tokens']}, reference {exact[2]}")
    summary = ", ".join(f"{what} rel err {ours:.2e} (AMP {theirs:.2e})" for what, (ours, theirs) in errors.items())
    return failures, summary


def main():
    args = parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    src_lines, tgt_lines = write_random_ids(args.workdir, args.seed, args.model_kind == "encoder-only")
    score, weights_path, grads_path = normlab_score(args)
    state, config = load_weights(weights_path)
    grads = torch.load(grads_path, map_location="cpu", weights_only=True)

    case = (f"{args.model_kind}/" if args.model_kind != "encoder-decoder" else "") + f"{args.scheme}/{args.share}/{args.formula}" + (f"/z-loss {args.z_loss:g}" if args.z_loss else "")
    if args.precision == "bf16":
        failures, summary = check_mixed_precision(score, grads, state, config, src_lines, tgt_lines, args)
        if failures:
            print(f"FAIL {case} bf16:\n  " + "\n  ".join(failures))
            sys.exit(1)
        print(f"OK {case} bf16 against float64: {summary}")
        return

    failures = check_config(config, state, args)
    loss, nll, tokens, ref_grads, ref_tied = reference_score(state, config, src_lines, tgt_lines, args.formula,
                                                             z_loss=args.z_loss)
    if ref_tied != config["tied"]:
        failures.append(f"reference aliases {ref_tied} differ from weights.json tied {config['tied']}")
    loss_error = abs(score["loss"] - loss) / abs(loss)
    nll_error = abs(score["nll"] - nll) / abs(nll)
    if loss_error >= TOLERANCE:
        failures.append(f"loss: normlab {score['loss']!r}, reference {loss!r}, relative error {loss_error:.3e}")
    if nll_error >= TOLERANCE:
        failures.append(f"nll: normlab {score['nll']!r}, reference {nll!r}, relative error {nll_error:.3e}")
    if score["tokens"] != tokens:
        failures.append(f"tokens: normlab {score['tokens']}, reference {tokens}")
    grad_failures, worst, worst_name = compare_gradients(
        ref_grads, grads, zero_suffix="k_norm.bias" if args.qk_norm else "k_proj.bias")
    failures += grad_failures

    if failures:
        print(f"FAIL {case}:\n  " + "\n  ".join(failures))
        sys.exit(1)
    print(f"OK {case}: loss {loss:.10g} (rel err {loss_error:.1e}), nll {nll:.10g} "
          f"(rel err {nll_error:.1e}), {tokens} tokens, {len(ref_grads)} parameters, "
          f"worst gradient rel err {worst:.1e} ({worst_name})")


if __name__ == "__main__":
    main()
