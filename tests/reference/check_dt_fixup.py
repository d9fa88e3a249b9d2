#!/usr/bin/env python3
"""ctest driver: layers added by `normlab train --init-from ... --init dt-fixup` (Xu et al. 2021)
against the independent reference (reference_model.py, written from docs/conventions.md).

A tiny Post-LN model trained on Multi30k val gets 2 encoder and 1 decoder layers; the grown run
trains at lr 1e-30, so its checkpoint holds the weights of the initialisation (an Adam step of
1e-30 is below float32's resolution of every weight; the zero biases move by ~1e-30). Checked:
- dt-fixup (the authors' form): weights.json records the norm-free layers and weights.pt has no
  norm in them (the reference loads it strictly); normlab's loss and gradients on random ids
  equal the reference's forward (float32 against float64);
- mu recomputed with the reference: the largest token norm of the trained layers' output over the
  training pairs (ids from `normlab bpe encode`), and for the decoder of the trained decoder
  layers' output and of the encoder output; the divisors sqrt(N (4 mu^2 + 2 mu + 2)) from it,
  N = 2 and 1.5 x 1 (BorealisAI/DT-Fixup optimizers.py:64-68), against the init_from event;
- the added v, out, fc1, fc2 weights are Xavier-uniform at gain 1 over the divisor: within that
  bound and above 0.8 of it (their maximum over 256+ draws);
- dt-fixup-postln: the added layers keep their norms (weights.pt), the forward again.
"""
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))
import cli_setup  # noqa: E402
from check_score import parse_score_json, reference_score, write_random_ids  # noqa: E402
from reference_model import ReferenceTransformer, key_padding, load_weights, make_batch  # noqa: E402

PAIRS = 60          # --max-pairs: the training pairs mu is measured over
ADDED = (2, 1)      # encoder, decoder layers added to a 1 + 1-layer model
FP32 = 1e-5         # float32 against float64: loss
FP32_GRAD = 1e-4    # ... all gradients as one vector


def run(*argv):
    r = subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=180)
    if r.returncode != 0:
        sys.exit(f"FAIL: {' '.join(map(str, argv))}: {r.stderr[-2000:]}")
    return r.stdout


def encode(normlab, spm, path):
    """Each line of `path` as SentencePiece ids (`normlab bpe encode --ids`)."""
    out = run(normlab, "bpe", "encode", "--model", spm, "--input", path, "--ids")
    return [[int(t) for t in line.split()] for line in out.splitlines()]


def training_pairs(normlab, spm, prefix):
    """The first PAIRS pairs without an empty side (the trainer's filter at its defaults)."""
    src, tgt = encode(normlab, spm, prefix + ".de.gz"), encode(normlab, spm, prefix + ".en.gz")
    return [(s, t) for s, t in list(zip(src, tgt))[:PAIRS] if s and t]


def largest_norm(x, tokens, pad):
    return x.norm(dim=-1).masked_fill(tokens.eq(pad), 0).max().item()


@torch.no_grad()
def reference_mu(config, state, pairs, trained):
    """(mu_encoder, mu_decoder) of the grown model with `trained` = (encoder, decoder) layers
    trained: the output of the last trained layer of each stack, and the encoder's output."""
    model = ReferenceTransformer(config).double().eval()
    model.load_state_dict(state, strict=True)
    pad, eos = config["special_tokens"]["pad"], config["special_tokens"]["eos"]
    source, prev, _ = make_batch([s for s, _ in pairs], [t for _, t in pairs], pad, eos)
    blocked = key_padding(source, pad)
    enc, dec = model.encoder, model.decoder
    x = enc.embed(source)
    for i, layer in enumerate(enc.layers):
        x = layer(x, blocked)
        if i == trained[0] - 1:
            mu_e = largest_norm(x, source, pad)
    mu_d = largest_norm(x, source, pad)  # what the added decoder layers' cross-attention reads
    length = prev.size(1)
    self_blocked = torch.ones(length, length, dtype=torch.bool).triu(1) | key_padding(prev, pad)
    y = dec.embed(prev)
    for layer in dec.layers[:trained[1]]:
        y = layer(y, self_blocked, x, blocked)
    return mu_e, max(mu_d, largest_norm(y, prev, pad))


def divisor(mu, layers):
    return math.sqrt(layers * (4 * mu * mu + 2 * mu + 2))


def grown(args, prefix, w, base, init):
    out = w(init)
    run(args.normlab, "train", "--train", prefix, "--valid", prefix, "--max-tokens", 1000, "--threads", 1,
        "--device", "cpu", "--init-from", base, "--add-encoder-layers", ADDED[0], "--add-decoder-layers", ADDED[1],
        "--init", init, "--max-pairs", PAIRS, "--lr", "1e-30", "--lr-schedule", "constant", "--warmup-steps", 0,
        "--max-steps", 1, "--out", out)
    checkpoint = os.path.join(out, "checkpoints", "checkpoint_last.pt")
    weights = Path(out) / "weights.pt"
    run(args.normlab, "export", "--checkpoint", checkpoint, "--out", weights)
    event = [json.loads(l) for l in open(os.path.join(out, "metrics.jsonl")) if '"init_from"' in l][0]
    return checkpoint, *load_weights(weights), event


def check_forward(args, check, w, tag, checkpoint, state, config):
    """normlab score on random ids against the reference's loss and gradients."""
    workdir = Path(w(tag + "-score"))
    workdir.mkdir()
    src_lines, tgt_lines = write_random_ids(workdir, 5)
    grads_path = workdir / "grads.pt"
    score = parse_score_json(run(args.normlab, "score", "--checkpoint", checkpoint, "--src-ids",
                                 workdir / "src.ids", "--tgt-ids", workdir / "tgt.ids", "--label-smoothing", 0.1,
                                 "--ls-formula", "uniform", "--json", "--grad-out", grads_path))
    loss, _, tokens, ref_grads, _ = reference_score(state, config, src_lines, tgt_lines, "uniform")
    grads = torch.load(grads_path, map_location="cpu", weights_only=True)
    names = sorted(ref_grads)
    check(set(grads) == set(names), f"{tag}: gradient names differ: {sorted(set(grads) ^ set(names))}")
    check(abs(score["loss"] - loss) < FP32 * abs(loss) and score["tokens"] == tokens,
          f"{tag}: loss {score['loss']} against the reference's {loss}")
    if set(grads) == set(names):
        ref = torch.cat([ref_grads[n].flatten() for n in names])
        ours = torch.cat([grads[n].double().flatten() for n in names])
        error = ((ref - ours).norm() / ref.norm()).item()
        check(error < FP32_GRAD, f"{tag}: gradients' relative error {error:.2e} against the reference")


def main():
    args, prefix, w = cli_setup.parse_and_prepare()
    check = cli_setup.Checks()
    run(*cli_setup.tiny_train(args.normlab, prefix, w("base"), "--max-steps", 6, "--warmup-steps", 2,
                              "--max-tokens", 1000))
    base = w("base/checkpoints/checkpoint_last.pt")
    pairs = training_pairs(args.normlab, w("base/vocab/spm.model"), prefix)

    checkpoint, state, config, event = grown(args, prefix, w, base, "dt-fixup")
    model = config["model"]
    check(model.get("norm_free_encoder_layers") == ADDED[0] and model.get("norm_free_decoder_layers") == ADDED[1],
          f"weights.json model: {model}")
    norms = [n for n in state if "layer_norm" in n]
    added = ("encoder.layers.1.", "encoder.layers.2.", "decoder.layers.1.")
    check(norms and not any(n.startswith(added) for n in norms), f"norms in the added layers: {norms}")
    check_forward(args, check, w, "dt-fixup", checkpoint, state, config)

    mu_e, mu_d = reference_mu(config, state, pairs, (1, 1))
    n_e, n_d = ADDED[0], 1.5 * ADDED[1]
    for what, mu, n in (("encoder", mu_e, n_e), ("decoder", mu_d, n_d)):
        ours = event[f"mu_{what}"]
        check(abs(ours - mu) < FP32 * mu, f"mu_{what}: normlab {ours}, reference {mu}")
        check(abs(event[f"divisor_{what}"] - divisor(mu, n)) < FP32 * divisor(mu, n),
              f"divisor_{what}: normlab {event[f'divisor_{what}']}, from the reference's mu {divisor(mu, n)}")
    for name, d in (("encoder.layers.2.self_attn.v_proj.weight", divisor(mu_e, n_e)),
                    ("encoder.layers.1.self_attn.out_proj.weight", divisor(mu_e, n_e)),
                    ("encoder.layers.2.fc1.weight", divisor(mu_e, n_e)),
                    ("decoder.layers.1.encoder_attn.v_proj.weight", divisor(mu_d, n_d)),
                    ("decoder.layers.1.fc2.weight", divisor(mu_d, n_d))):
        weight = state[name]
        bound = math.sqrt(6 / sum(weight.shape)) / d  # Xavier-uniform at gain 1, over the divisor
        largest = weight.abs().max().item()
        check(0.8 * bound < largest <= bound * (1 + 1e-6), f"{name}: max |w| {largest}, bound {bound}")

    checkpoint, state, config, _ = grown(args, prefix, w, base, "dt-fixup-postln")
    check("norm_free_encoder_layers" not in config["model"], f"dt-fixup-postln: {config['model']}")
    check(all(f"{p}final_layer_norm.weight" in state for p in added), "dt-fixup-postln: the added layers' norms")
    check_forward(args, check, w, "dt-fixup-postln", checkpoint, state, config)
    return check.finish()


if __name__ == "__main__":
    sys.exit(main())
