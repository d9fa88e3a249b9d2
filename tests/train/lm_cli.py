#!/usr/bin/env python3
"""A decoder-only language model end to end on real English text (issue 35): `normlab lm-data`,
`normlab train --model-kind decoder-only` on its valid.txt with test.txt as validation and test
text, then `normlab eval-lm`. Checks: the loss falls; eval-lm on the validation text gives the
run's last valid_nll (to 1e-6: fp32 sums over other batches) and its token count exactly
(the same blocks, re-encoded); the
test record equals eval-lm on test.txt; perplexity is exp(nll); eval-lm refuses an
encoder-decoder checkpoint with one line. Then a masked LM (`--model-kind encoder-only --form
bert --validate-interval-updates 10`): the loss falls; a validation record every 10 updates; eval-lm
on the validation text repeats the last valid_nll and its masked-token count, which is floor(0.15 n)
or one more per block of n = 63 candidates; another --seed masks other tokens."""
import json
import math
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import cli_setup  # noqa: E402
from cli_setup import run  # noqa: E402


def main():
    args, w, lm = cli_setup.start_lm()
    normlab = args.normlab
    run(normlab, "lm-data", "--data", lm, "--out", w("lm"))
    text = lambda split: os.path.join(w("lm"), f"{split}.txt")
    out = w("run")
    run(normlab, "train", "--model-kind", "decoder-only", "--scheme", "pre-ln", "--layers", 2, "--d-model", 32,
        "--ffn-dim", 64, "--heads", 2, "--max-positions", 64, "--block-size", 64, "--train", text("valid"),
        "--valid", text("test"), "--test", text("test"), "--vocab-size", 1000, "--max-tokens", 2048,
        "--max-steps", 40, "--log-interval", 10, "--lr", "3e-3", "--warmup-steps", 5, "--label-smoothing", 0,
        "--dropout", 0.1, "--seed", 3, "--threads", 1, "--out", out)
    records = [json.loads(line) for line in open(os.path.join(out, "metrics.jsonl"))]
    train = [r for r in records if "loss" in r and "step" in r]
    valid = [r for r in records if "valid_nll" in r][-1]
    test = [r for r in records if "test_nll" in r][-1]
    ckpt = os.path.join(out, "checkpoints", "checkpoint_last.pt")
    ev = lambda split: json.loads(run(normlab, "eval-lm", "--checkpoint", ckpt, "--text", text(split), "--json",
                                      "--threads", 1).stdout)
    on_valid = on_test = ev("test")  # test.txt is both the validation and the test text
    check = cli_setup.Checks()
    check(train[-1]["loss"] < train[0]["loss"] - 0.5, f"the training loss did not fall: {train[0]['loss']} -> {train[-1]['loss']}")
    same = lambda a, b: math.isclose(a, b, rel_tol=1e-6)  # fp32 sums of other batches
    check(same(on_valid["nll"], valid["valid_nll"]) and on_valid["tokens"] == valid["valid_tokens"],
          f"eval-lm {on_valid['nll']!r} on {on_valid['tokens']} tokens, the run's valid_nll {valid['valid_nll']!r} "
          f"on {valid['valid_tokens']}")
    check(same(on_test["nll"], test["test_nll"]), f"eval-lm {on_test['nll']!r}, the run's test_nll {test['test_nll']!r}")
    check(math.isclose(on_valid["ppl"], math.exp(on_valid["nll"]), rel_tol=1e-12), "ppl is not exp(nll)")
    check(on_valid["blocks"] * 64 == on_valid["tokens"], f"{on_valid['blocks']} blocks of 64, {on_valid['tokens']} tokens")
    run(normlab, "init", "--d-model", 8, "--ffn-dim", 8, "--heads", 2, "--layers", 1, "--vocab-size", 20,
        "--out", w("seq2seq.pt"))
    refused = subprocess.run([normlab, "eval-lm", "--checkpoint", w("seq2seq.pt"), "--text", text("test")],
                             capture_output=True, text=True)
    check(refused.returncode == 2 and len(refused.stderr.strip().splitlines()) == 1 and
          "needs a decoder-only or encoder-only model, not encoder-decoder" in refused.stderr,
          f"eval-lm on an encoder-decoder: rc {refused.returncode}, {refused.stderr!r}")
    masked = check_masked_lm(normlab, w, text, check)
    return check.finish(f"train loss {train[0]['loss']:.3f} -> {train[-1]['loss']:.3f}, "
                        f"valid ppl {valid['valid_ppl']:.1f}, test ppl {on_test['ppl']:.1f}; {masked}")


def check_masked_lm(normlab, w, text, check):
    """The encoder-only part; returns a summary."""
    out = w("mlm")
    run(normlab, "train", "--model-kind", "encoder-only", "--form", "bert", "--scheme", "post-ln", "--layers", 2,
        "--d-model", 32, "--ffn-dim", 64, "--heads", 2, "--max-positions", 64, "--block-size", 64,
        "--train", text("valid"), "--valid", text("test"), "--vocab-size", 1000, "--max-tokens", 2048,
        "--max-steps", 40, "--log-interval", 10, "--validate-interval-updates", 10, "--lr", "1e-3",
        "--warmup-steps", 5, "--label-smoothing", 0, "--dropout", 0.1, "--seed", 3, "--threads", 1, "--out", out)
    records = [json.loads(line) for line in open(os.path.join(out, "metrics.jsonl"))]
    train = [r for r in records if "loss" in r and "step" in r]
    valid = [r for r in records if "valid_nll" in r]
    check(train[-1]["loss"] < train[0]["loss"] - 0.3,
          f"masked LM: the training loss did not fall: {train[0]['loss']} -> {train[-1]['loss']}")
    check([r["step"] for r in valid] == [10, 20, 30, 40], f"masked LM: validations at {[r['step'] for r in valid]}")
    ckpt = os.path.join(out, "checkpoints", "checkpoint_last.pt")
    ev = lambda *more: json.loads(run(normlab, "eval-lm", "--checkpoint", ckpt, "--text", text("test"), "--json",
                                      "--threads", 1, *more).stdout)
    mine, other = ev(), ev("--seed", 9)
    check(math.isclose(mine["nll"], valid[-1]["valid_nll"], rel_tol=1e-6) and mine["tokens"] == valid[-1]["valid_tokens"],
          f"masked LM: eval-lm {mine['nll']!r} on {mine['tokens']} tokens, valid_nll {valid[-1]['valid_nll']!r} on "
          f"{valid[-1]['valid_tokens']}")
    blocks = mine["blocks"]
    check(9 * blocks <= mine["tokens"] <= 10 * blocks,
          f"masked LM: {mine['tokens']} masked tokens in {blocks} blocks of 63 candidates (expected 9 or 10 each)")
    check(other["nll"] != mine["nll"], "masked LM: eval-lm --seed 9 gave the same nll (the same masks?)")
    check(0.0 < mine["accuracy"] < 1.0 and mine["kind"] == "encoder-only", f"masked LM: eval-lm said {mine}")
    return (f"masked LM loss {train[0]['loss']:.3f} -> {train[-1]['loss']:.3f}, masked-token accuracy "
            f"{mine['accuracy']:.3f} over {mine['tokens']} tokens")


if __name__ == "__main__":
    sys.exit(main())
