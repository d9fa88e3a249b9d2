#!/usr/bin/env python3
"""normlab train --init-from on real data (Multi30k val, a tiny model): layers added on top of
a trained model with DT-Fixup, the trained parameters frozen (--pretrained-lr-scale 0: read back
with torch.load, bit-identical to the checkpoint they came from) while the added ones train; the
vocabulary carried over; --max-pairs; the init_from event; resuming the grown run, and refusing
a changed --add-encoder-layers; DT-Fixup refused on a Pre-LN checkpoint; the added layers without
norms (recorded in config.json), and layers with norms refused on top of them. A decoder-only
language model (val.en as running text) grows its one stack the same way (issue 35): frozen
trained layers, added layers that train, the single-stack DT-Fixup divisor sqrt(N (4 mu^2 + 2 mu + 2))
in its event, and --add-encoder-layers refused on it; a u-mup checkpoint's refusals (sgd, --warmup
auto) apply to the run that starts from it."""
import json
import os
import subprocess
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import cli_setup  # noqa: E402


def main():
    args, prefix, w = cli_setup.parse_and_prepare()
    check = cli_setup.Checks()
    common = ["--train", prefix, "--valid", prefix, "--max-tokens", "1000", "--threads", "1", "--device", "cpu"]

    def train(*extra):
        return subprocess.run([args.normlab, "train", *common, *extra], capture_output=True, text=True, timeout=120)

    tiny = ["--vocab-size", "300", "--d-model", "16", "--ffn-dim", "32", "--heads", "2", "--layers", "1"]
    for scheme in ("post-ln", "pre-ln"):
        r = train(*tiny, "--scheme", scheme, "--max-steps", "6", "--warmup-steps", "2", "--out", w(scheme))
        if r.returncode != 0:
            print(f"FAIL: base {scheme}: {r.stderr}")
            return 1
    base = w("post-ln/checkpoints/checkpoint_last.pt")
    grow = ["--init-from", base, "--add-encoder-layers", "2", "--add-decoder-layers", "1", "--init", "dt-fixup",
            "--pretrained-lr-scale", "0", "--max-pairs", "300", "--warmup-steps", "0", "--lr", "1e-3"]
    r = train(*grow, "--max-steps", "4", "--out", w("grown"))
    check(r.returncode == 0, f"grown run failed: {r.stderr}")
    if r.returncode != 0:
        return check.finish()

    before = torch.load(base)
    after = torch.load(w("grown/checkpoints/checkpoint_last.pt"))
    trained = [k for k, v in before.items() if isinstance(v, torch.Tensor) and k.startswith(("encoder.", "decoder."))]
    check(len(trained) > 20, f"too few trained parameters found: {len(trained)}")
    for k in trained:
        check(torch.equal(before[k], after[k]), f"{k}: a frozen trained parameter changed")
    added = [k for k in after if k.startswith(("encoder.layers.1.", "encoder.layers.2.", "decoder.layers.1."))]
    check(len(added) > 20, f"too few added parameters: {len(added)}")
    first = subprocess.run([args.normlab, "train", *common, *grow, "--max-steps", "1", "--out", w("grown0")],
                           capture_output=True, text=True, timeout=120)
    check(first.returncode == 0, f"one-step run failed: {first.stderr}")
    one = torch.load(w("grown0/checkpoints/checkpoint_last.pt"))
    moved = [k for k in added if k.endswith("fc1.weight") and not torch.equal(one[k], after[k])]
    check(len(moved) == 3, f"the added fc1 weights should train (3 layers), moved: {moved}")

    with open(w("post-ln/vocab/spm.model"), "rb") as a, open(w("grown/vocab/spm.model"), "rb") as b:
        check(a.read() == b.read(), "the grown run's vocabulary is not the checkpoint's")
    log = open(w("grown/train.log")).read()
    check("pairs kept of 300 (--max-pairs)" in log, f"--max-pairs not in train.log:\n{log}")
    events = [json.loads(l) for l in open(w("grown/metrics.jsonl")) if '"init_from"' in l]
    check(len(events) == 1, f"one init_from event expected, got {events}")
    if events:
        e = events[0]
        mu = e["mu_encoder"]
        check(e["init"] == "dt-fixup" and e["add_encoder_layers"] == 2 and mu > 0, f"event: {e}")
        check(abs(e["divisor_encoder"] - (2 * (4 * mu * mu + 2 * mu + 2)) ** 0.5) < 1e-9 * e["divisor_encoder"],
              f"divisor: {e}")
    config = json.load(open(w("grown/config.json")))
    check(config["model"]["encoder_layers"] == 3 and config["model"]["decoder_layers"] == 2 and
          config["model"]["norm_free_encoder_layers"] == 2 and config["model"]["norm_free_decoder_layers"] == 1,
          f"config.json model: {config['model']}")
    # The authors' form: no norms in the added layers (the reference test checks their forward).
    check(not any("layer_norm" in k for k in added) and "encoder.layers.0.final_layer_norm.weight" in after,
          "the added layers of --init dt-fixup have norms")

    # Resuming continues; a different number of added layers is another experiment.
    r = train(*grow, "--max-steps", "6", "--out", w("grown"))
    check(r.returncode == 0 and "resuming at update 4" in r.stderr, f"resume: {r.returncode} {r.stderr[-500:]}")
    changed = [a if a != "2" else "3" for a in grow]
    r = train(*changed, "--max-steps", "8", "--out", w("grown"))
    check(r.returncode == 2 and "init_from.add_encoder_layers was 2, now 3" in r.stderr, f"changed: {r.stderr}")

    r = train("--init-from", w("pre-ln/checkpoints/checkpoint_last.pt"), "--add-encoder-layers", "1",
              "--init", "dt-fixup", "--max-steps", "1", "--out", w("pre"))
    lines = r.stderr.strip().splitlines()
    check(r.returncode == 2 and len(lines) == 1 and "go on a Post-LN model's output" in lines[0], f"pre-ln: {r.stderr}")
    # Layers with norms (dt-fixup-postln) cannot go on the grown stacks that end without them.
    r = train("--init-from", w("grown/checkpoints/checkpoint_last.pt"), "--add-encoder-layers", "1",
              "--init", "dt-fixup-postln", "--max-steps", "1", "--out", w("on-grown"))
    lines = r.stderr.strip().splitlines()
    check(r.returncode == 2 and len(lines) == 1 and "only --init dt-fixup adds more" in lines[0],
          f"dt-fixup-postln on norm-free layers: {r.stderr}")
    check_decoder_only(args, prefix, w, check)
    return check.finish()


def check_decoder_only(args, prefix, w, check):
    """A decoder-only checkpoint grows its decoder through `train --init-from` (issue 35)."""
    text = prefix + ".en.gz"
    lm = ["--train", text, "--valid", text, "--block-size", "32", "--max-tokens", "400", "--threads", "1",
          "--device", "cpu"]

    def train(*extra):
        return subprocess.run([args.normlab, "train", *lm, *extra], capture_output=True, text=True, timeout=120)

    r = train("--model-kind", "decoder-only", "--scheme", "post-ln", "--vocab-size", "300", "--d-model", "16",
              "--ffn-dim", "32", "--heads", "2", "--layers", "2", "--max-steps", "4", "--warmup-steps", "2",
              "--out", w("lm"))
    check(r.returncode == 0, f"decoder-only base: {r.stderr[-500:]}")
    if r.returncode != 0:
        return
    base = w("lm/checkpoints/checkpoint_last.pt")
    grow = ["--init-from", base, "--add-decoder-layers", "2", "--init", "dt-fixup", "--pretrained-lr-scale", "0",
            "--warmup-steps", "0", "--lr", "1e-3"]
    runs = {steps: train(*grow, "--max-steps", str(steps), "--out", w(f"lm-grown{steps}")) for steps in (1, 3)}
    for steps, r in runs.items():
        check(r.returncode == 0, f"decoder-only grown ({steps} updates): {r.stderr[-500:]}")
    if any(r.returncode != 0 for r in runs.values()):
        return
    before = torch.load(base)
    one, after = (torch.load(w(f"lm-grown{s}/checkpoints/checkpoint_last.pt")) for s in (1, 3))
    trained = [k for k, v in before.items() if isinstance(v, torch.Tensor) and k.startswith("decoder.")]
    check(len(trained) > 20 and all(torch.equal(before[k], after[k]) for k in trained),
          f"decoder-only: a frozen trained parameter changed (of {len(trained)})")
    added = [k for k in after if k.startswith(("decoder.layers.2.", "decoder.layers.3."))]
    moved = [k for k in added if k.endswith("fc1.weight") and not torch.equal(one[k], after[k])]
    check(len(added) > 10 and len(moved) == 2, f"decoder-only: added {len(added)}, fc1 moved {moved}")
    check(not any(k.startswith("encoder.") for k in after), "decoder-only: the grown model has an encoder")
    model = json.load(open(w("lm-grown3/config.json")))["model"]
    check(model["kind"] == "decoder-only" and model["decoder_layers"] == 4 and
          model.get("norm_free_decoder_layers") == 2, f"decoder-only config.json model: {model}")
    events = [json.loads(l) for l in open(w("lm-grown3/metrics.jsonl")) if '"init_from"' in l]
    e = events[0] if len(events) == 1 else {}
    mu = e.get("mu_decoder", 0)
    check(e.get("add_decoder_layers") == 2 and mu > 0 and
          abs(e["divisor_decoder"] - (2 * (4 * mu * mu + 2 * mu + 2)) ** 0.5) < 1e-9 * e["divisor_decoder"],
          f"decoder-only init_from event: {events}")
    r = train("--init-from", base, "--add-encoder-layers", "1", "--max-steps", "1", "--out", w("lm-encoder"))
    lines = r.stderr.strip().splitlines()
    check(r.returncode == 2 and len(lines) == 1 and "encoder" in lines[0], f"--add-encoder-layers on decoder-only: {r.stderr}")
    # The options are checked against the checkpoint's parametrisation, the instruments' too.
    r = train("--model-kind", "decoder-only", "--scheme", "pre-ln", "--form", "gpt2", "--share", "none", "--dropout", "0",
              "--parametrisation", "u-mup", "--vocab-size", "300", "--d-model", "16", "--ffn-dim", "32", "--heads", "2",
              "--layers", "1", "--optimizer", "adam", "--max-steps", "1", "--warmup-steps", "0", "--out", w("lm-umup"))
    check(r.returncode == 0, f"u-mup base: {r.stderr[-500:]}")
    umup = w("lm-umup/checkpoints/checkpoint_last.pt")
    for extra, want in ((["--optimizer", "sgd"], "--parametrisation u-mup: --optimizer sgd has no u-muP rule here"),
                        (["--optimizer", "adam", "--warmup", "auto", "--lr-schedule", "constant", "--warmup-steps", "0"],
                         "--warmup auto measures one lr for every parameter: not with --parametrisation u-mup")):
        r = train("--init-from", umup, *extra, "--max-steps", "2", "--out", w("lm-umup-more"))
        lines = r.stderr.strip().splitlines()
        check(r.returncode == 2 and len(lines) == 1 and want in lines[0], f"--init-from u-mup with {extra}: {r.stderr}")


if __name__ == "__main__":
    sys.exit(main())
