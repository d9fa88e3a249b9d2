#!/usr/bin/env python3
"""Fine-tuning a classifier on a masked LM's intermediate checkpoint (issue 35, Xiong et al. Fig.
5(b, c); docs/finetune.md), end to end on real text: `normlab lm-data` (Milton and the Wikipedia
pages), a tiny masked LM saving a checkpoint every 4 updates, `normlab lm-tasks`, then
`normlab finetune --init-from RUN/checkpoints --init-from-update 4 --num-classes 2`. Checks:
- with --pretrained-lr-scale 0 the classifier's encoder tensors are checkpoint_1_4.pt's bit for bit
  (and differ from checkpoint_1_8.pt's), its head is new, the masked-LM head is left behind, and
  the init_from record says so;
- --classifier-pooling mean is recorded (config.json, the init_from record) and validates
  differently from <s>'s head on the same frozen encoder;
- validation records carry valid_accuracy in [0, 1] with valid_tokens the dev set's examples;
  eval-lm on dev.tsv repeats the last validation's accuracy and loss (the same examples);
- a classifier resumes bit for bit: 6 updates in one run equal 3, then 3 more after a restart;
- bad input gets one error line and exit 2: an update with no checkpoint (the line lists those there
  are), a label missing or not below --num-classes (FILE:LINE), finetune without --init-from,
  --num-classes on a checkpoint that is not encoder-only, --classifier-pooling without --num-classes."""
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import cli_setup  # noqa: E402
from cli_setup import run  # noqa: E402


def tensors(checkpoint):
    state = torch.load(checkpoint)
    return {k: v for k, v in state.items() if not k.startswith(("extra/", "__normlab"))}


def records(run_dir):
    return [json.loads(line) for line in open(os.path.join(run_dir, "metrics.jsonl"))]


def main():
    args, w, lm = cli_setup.start_lm()
    normlab = args.normlab
    check = cli_setup.Checks()
    run(normlab, "lm-data", "--data", lm, "--out", w("lm"), "--sources", "milton,wikipedia")
    mlm = w("mlm")
    run(normlab, "train", "--model-kind", "encoder-only", "--form", "bert", "--scheme", "post-ln", "--layers", 1,
        "--d-model", 16, "--ffn-dim", 32, "--heads", 2, "--max-positions", 128, "--block-size", 32,
        "--train", os.path.join(w("lm"), "valid.txt"), "--valid", os.path.join(w("lm"), "test.txt"),
        "--vocab-size", 300, "--max-tokens", 1024, "--max-steps", 8, "--save-interval-updates", 4,
        "--lr", "1e-3", "--label-smoothing", 0, "--seed", 2, "--threads", 1, "--out", mlm)
    run(normlab, "lm-tasks", "--data", w("lm"), "--out", w("tasks"), "--max-examples", 120, "--max-words", 8)
    train_tsv = os.path.join(w("tasks"), "next-line", "train.tsv")
    dev_tsv = os.path.join(w("tasks"), "next-line", "dev.tsv")
    checkpoints = os.path.join(mlm, "checkpoints")
    finetune = lambda out, *more: [
        "finetune", "--init-from", checkpoints, "--init-from-update", 4, "--num-classes", 2, "--train", train_tsv,
        "--valid", dev_tsv, "--lr", "1e-3", "--max-sentences", 16, "--max-tokens", 1024, "--label-smoothing", 0,
        "--log-interval", 1, "--seed", 5, "--threads", 1, "--out", out, *more]

    # Frozen encoder: its tensors are the pre-trained checkpoint's.
    frozen = w("frozen")
    run(normlab, *finetune(frozen, "--max-steps", 3, "--pretrained-lr-scale", 0))
    clf = tensors(os.path.join(frozen, "checkpoints", "checkpoint_last.pt"))
    at4 = tensors(os.path.join(checkpoints, "checkpoint_1_4.pt"))
    at8 = tensors(os.path.join(checkpoints, "checkpoint_1_8.pt"))
    encoder = [k for k in clf if k.startswith("encoder.")]
    check(encoder and all(torch.equal(clf[k], at4[k]) for k in encoder),
          "a frozen encoder differs from checkpoint_1_4.pt's")
    check(any(not torch.equal(at4[k], at8[k]) for k in encoder), "checkpoint_1_4 and _1_8 hold the same encoder")
    head = sorted(k for k in clf if not k.startswith("encoder."))
    check(head == ["classification_head.dense.bias", "classification_head.dense.weight",
                   "classification_head.out_proj.bias", "classification_head.out_proj.weight"],
          f"the classifier's other tensors: {head}")
    check(tuple(clf["classification_head.out_proj.weight"].shape) == (2, 16), "out_proj is not 2 x 16")
    event = [r for r in records(frozen) if r.get("event") == "init_from"]
    check(len(event) == 1 and event[0]["copied"] == len(encoder) and len(event[0]["initialised"]) == 4
          and all(name.startswith("lm_head.") for name in event[0]["dropped"]) and event[0]["dropped"],
          f"the init_from record: {event}")

    # --classifier-pooling mean: recorded in the run's model and the init_from record; the same
    # frozen encoder and head draw (same seed) give another validation loss than <s>'s.
    mean = w("mean")
    run(normlab, *finetune(mean, "--max-steps", 3, "--pretrained-lr-scale", 0, "--classifier-pooling", "mean"))
    with open(os.path.join(mean, "config.json")) as f:
        config = json.load(f)
    mean_event = [r for r in records(mean) if r.get("event") == "init_from"]
    check(config["model"].get("classifier_pooling") == "mean" and mean_event
          and mean_event[0]["classifier_pooling"] == "mean" and event[0]["classifier_pooling"] == "cls",
          f"the pooling recorded: {config['model']}, {mean_event}")
    first_valid = lambda d: [r["valid_nll"] for r in records(d) if "valid_nll" in r][0]
    check(first_valid(mean) != first_valid(frozen), "mean pooling validates as <s> does")

    # Validation accuracy, and eval-lm on the same examples.
    valid = [r for r in records(frozen) if "valid_accuracy" in r]
    dev_examples = sum(1 for _ in open(dev_tsv))
    check(valid and all(0 <= r["valid_accuracy"] <= 1 and r["valid_tokens"] == dev_examples for r in valid),
          f"validation records {valid} (dev has {dev_examples} examples)")
    ev = json.loads(run(normlab, "eval-lm", "--checkpoint", os.path.join(frozen, "checkpoints", "checkpoint_last.pt"),
                        "--text", dev_tsv, "--json", "--threads", 1).stdout)
    check(ev["examples"] == dev_examples and abs(ev["accuracy"] - valid[-1]["valid_accuracy"]) < 1e-12
          and abs(ev["nll"] - valid[-1]["valid_nll"]) < 1e-6 * max(1.0, ev["nll"]),
          f"eval-lm {ev}, the last validation {valid[-1]}")

    # Resume bit for bit (the encoder trains too).
    whole, split = w("whole"), w("split")
    run(normlab, *finetune(whole, "--max-steps", 6))
    run(normlab, *finetune(split, "--max-steps", 3))
    run(normlab, *finetune(split, "--max-steps", 6))
    check(cli_setup.same_parameters(os.path.join(whole, "checkpoints", "checkpoint_last.pt"),
                                    os.path.join(split, "checkpoints", "checkpoint_last.pt")),
          "6 updates differ from 3 + 3 after a restart")
    losses = lambda d: [(r["step"], r["loss"]) for r in records(d) if "loss" in r and "step" in r and r["step"] > 3]
    check(losses(whole) == losses(split), f"the losses after update 3: {losses(whole)} vs {losses(split)}")

    # Bad input: one line, exit 2.
    def refused(argv, *needles):  # progress lines may come first (the training file read before the bad one)
        r = run(normlab, *argv, expect=2)
        errors = [line for line in r.stderr.splitlines() if "error" in line]
        check(len(errors) == 1 and all(n in errors[0] for n in needles), f"{argv[:5]}...: {r.stderr!r}")

    refused(finetune(w("bad1"), "--max-steps", 1)[:4] + [5] + finetune(w("bad1"), "--max-steps", 1)[5:],
            "no checkpoint of update 5", "4, 8")
    no_label = w("no_label.tsv")
    with open(no_label, "w") as f:
        f.write("1\ta\tb\n0\tc\td\nsome text\tmore\n")
    refused(["finetune", "--init-from", os.path.join(checkpoints, "checkpoint_1_4.pt"), "--num-classes", 2,
             "--train", train_tsv, "--valid", no_label, "--max-steps", 1, "--out", w("bad2")], f"{no_label}:3")
    big_label = w("big_label.tsv")
    with open(big_label, "w") as f:
        f.write("1\ta\tb\n2\tc\td\n")
    refused(["finetune", "--init-from", os.path.join(checkpoints, "checkpoint_1_4.pt"), "--num-classes", 2,
             "--train", train_tsv, "--valid", big_label, "--max-steps", 1, "--out", w("bad3")], f"{big_label}:2",
            "--num-classes")
    refused(["finetune", "--num-classes", 2, "--train", train_tsv, "--valid", dev_tsv, "--max-steps", 1,
             "--out", w("bad4")], "--init-from")
    refused(["finetune", "--init-from", os.path.join(checkpoints, "checkpoint_1_4.pt"), "--classifier-pooling",
             "mean", "--train", train_tsv, "--valid", dev_tsv, "--max-steps", 1, "--out", w("bad6")],
            "--classifier-pooling", "--num-classes")
    lm_ckpt = w("decoder.pt")
    run(normlab, "init", "--model-kind", "decoder-only", "--scheme", "pre-ln", "--layers", 1, "--d-model", 16,
        "--ffn-dim", 32, "--heads", 2, "--vocab-size", 50, "--out", lm_ckpt)
    refused(["finetune", "--init-from", lm_ckpt, "--num-classes", 2, "--train", train_tsv, "--valid", dev_tsv,
             "--max-steps", 1, "--out", w("bad5")], "--num-classes")
    return check.finish(f"{len(encoder)} encoder tensors copied; dev accuracy {valid[-1]['valid_accuracy']:.3f}")


if __name__ == "__main__":
    sys.exit(main())
