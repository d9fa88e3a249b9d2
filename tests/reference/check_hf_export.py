#!/usr/bin/env python3
"""ctest driver: `normlab export --format hf` loads into Hugging Face transformers as it is.

For each case a float32 model is made with `normlab init`, exported as a folder, and loaded
with transformers' own `GPT2LMHeadModel` / `BertForMaskedLM.from_pretrained` (no normlab code on
that side). On random id lines transformers' logits must equal the PyTorch reference model's
(reference_model.py on `normlab export`'s weights.pt; 1e-5), and transformers' summed
cross-entropy must equal `normlab score`'s nll (relative 1e-5). Decoder-only lines are read as
`</s> y`, predicting `y </s>`; encoder-only lines as masked rows `<s> x` with their targets.
  gpt2-tied      --form gpt2 (learned positions, GELU-tanh, unscaled tokens, GPT-2's init), tied
  sinusoid-gelu  sinusoidal positions (written as wpe), erf GELU, --no-scale-embedding, untied
  bert-tied      encoder-only Post-LN --form bert (BERT's embedding, GELU, BERT's init), tied head
  bert-untied    the same with an untied head and GELU-tanh (hidden_act gelu_new)
  bert-classifier  the same with a 3-class classification head (--num-classes 3), loaded as
                 BertForSequenceClassification; rows `<s> A </s> B </s>` with token types 1 after
                 the first </s>, and `normlab score`'s nll against transformers' cross entropy;
                 and with --classifier-pooling mean against the mean of transformers' last
                 hidden states through the same head, by hand (a mean-pooled export is refused)
A fairseq-form model (tokens x sqrt(C)), a Post-LN decoder-only one, a Pre-LN encoder-only one
an encoder-only one in fairseq's form and a mean-pooled classifier are refused with one line,
exit 2.
"""

import argparse
import json
import random
import subprocess
import sys
from pathlib import Path

import torch
from transformers import BertForMaskedLM, BertForSequenceClassification, GPT2LMHeadModel

sys.path.insert(0, str(Path(__file__).resolve().parent))
from reference_model import ReferenceTransformer, load_weights  # noqa: E402

VOCAB, BOS, PAD, EOS = 41, 0, 1, 2
SIZES = ["--d-model", 32, "--ffn-dim", 48, "--heads", 4, "--layers", 2, "--vocab-size", VOCAB,
         "--max-positions", 20, "--dtype", "float32", "--seed", 3]
DECODER, ENCODER = ["--model-kind", "decoder-only"], ["--model-kind", "encoder-only"]
CASES = {
    "gpt2-tied": DECODER + ["--scheme", "pre-ln", "--form", "gpt2"],
    "sinusoid-gelu": DECODER + ["--scheme", "pre-ln", "--activation", "gelu", "--no-scale-embedding", "--share", "none"],
    "bert-tied": ENCODER + ["--scheme", "post-ln", "--form", "bert"],
    "bert-untied": ENCODER + ["--scheme", "post-ln", "--form", "bert", "--share", "none", "--activation", "gelu-tanh"],
}
REFUSED = {
    "fairseq-form": (DECODER + ["--scheme", "pre-ln"], "token embeddings scaled by sqrt(C)"),
    "post-ln": (DECODER + ["--scheme", "post-ln", "--form", "gpt2"], "norm placement post (GPT-2 is pre)"),
    "bert-pre-ln": (ENCODER + ["--scheme", "pre-ln", "--form", "bert"], "norm placement pre (BERT is post)"),
    "bert-fairseq-form": (ENCODER + ["--scheme", "post-ln"], "sinusoidal positions (BERT learns them"),
}
CLASSIFIER = ENCODER + ["--scheme", "post-ln", "--form", "bert", "--num-classes", 3]
REFUSED["bert-classifier-mean"] = (CLASSIFIER + ["--classifier-pooling", "mean"],
                                   "--classifier-pooling mean (BertForSequenceClassification reads [CLS])")
LOGIT_TOLERANCE = 1e-5
NLL_TOLERANCE = 1e-5


def run(binary, *args, expect=0):
    command = [binary, *map(str, args)]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != expect:
        sys.exit(f"FAIL: {' '.join(command)} exited with {result.returncode}, expected {expect}\n"
                 f"{result.stdout}{result.stderr}")
    return result


def random_lines(seed):
    rng = random.Random(seed)
    return [[rng.randrange(4, VOCAB) for _ in range(n)] for n in (5, 12, 1, 18)]


def masked_rows(lines, seed):
    """Encoder-only lines x with about a third masked (<mask> = VOCAB - 1) and their targets (the
    original id where masked, else -100), as `normlab score` reads them; and the rows `<s> x` and
    targets (pad first, -100 as pad) that the models see."""
    rng = random.Random(seed)
    given, labels = [], []
    for line in lines:
        chosen = [j == 0 or rng.random() < 0.35 for j in range(len(line))]
        given.append([VOCAB - 1 if c else t for c, t in zip(chosen, line)])
        labels.append([t if c else -100 for c, t in zip(chosen, line)])
    rows = [[BOS] + x for x in given]
    targets = [[PAD] + [PAD if t == -100 else t for t in y] for y in labels]
    return given, labels, rows, targets


def write_ids(path, lines):
    path.write_text("".join(" ".join(map(str, line)) + "\n" for line in lines))
    return path


def check_case(args, name, flags, lines):
    work = args.workdir / name
    work.mkdir(parents=True, exist_ok=True)
    checkpoint = work / "model.ckpt"
    encoder = flags[:2] == ENCODER
    run(args.normlab, "init", *SIZES, *flags, "--out", checkpoint)
    run(args.normlab, "export", "--checkpoint", checkpoint, "--format", "hf", "--out", work / "hf")
    run(args.normlab, "export", "--checkpoint", checkpoint, "--out", work / "weights.pt")
    hf = (BertForMaskedLM if encoder else GPT2LMHeadModel).from_pretrained(work / "hf").eval()
    state, config = load_weights(work / "weights.pt")
    reference = ReferenceTransformer(config).eval()
    reference.load_state_dict(state, strict=True)
    if encoder:
        given, labels, rows, targets = masked_rows(lines, 5)
        ids = ["--src-ids", write_ids(work / "rows.ids", given), "--tgt-ids", write_ids(work / "labels.ids", labels)]
    else:
        rows, targets = [[EOS] + line for line in lines], [line + [EOS] for line in lines]
        ids = ["--tgt-ids", write_ids(work / "lines.ids", lines)]
    score = json.loads([line for line in run(args.normlab, "score", "--checkpoint", checkpoint, *ids,
                                             "--label-smoothing", 0, "--json").stdout.splitlines()
                        if line.startswith("{")][-1])
    failures, nll = [], 0.0
    with torch.no_grad():
        for row, target in zip(rows, targets):
            inputs = torch.tensor([row])
            theirs = hf(inputs).logits[0]
            ours = (reference(inputs, None) if encoder else reference(None, inputs))[0].float()
            worst = (theirs - ours).abs().max().item()
            if worst > LOGIT_TOLERANCE:
                failures.append(f"{name}: row {row}: transformers' logits differ from the reference's by {worst:.3g}")
            nll += torch.nn.functional.cross_entropy(theirs.double(), torch.tensor(target), ignore_index=PAD,
                                                     reduction="sum").item()
    error = abs(score["nll"] - nll) / nll
    if error > NLL_TOLERANCE:
        failures.append(f"{name}: normlab score nll {score['nll']}, transformers {nll}: relative error {error:.3g}")
    print(f"{name}: transformers loaded {sum(p.numel() for p in hf.parameters())} parameters; "
          f"nll normlab {score['nll']:.6f} transformers {nll:.6f}")
    return failures


def classifier_score(args, work, checkpoint, pairs, labels):
    """`normlab score`'s nll and example count of a classifier on rows A </s> B </s>."""
    score = json.loads([line for line in run(args.normlab, "score", "--checkpoint", checkpoint,
                                             "--src-ids", write_ids(work / "a.ids", [a for a, _ in pairs]),
                                             "--second-ids", write_ids(work / "b.ids", [b for _, b in pairs]),
                                             "--tgt-ids", write_ids(work / "labels.ids", labels),
                                             "--label-smoothing", 0, "--json").stdout.splitlines()
                        if line.startswith("{")][-1])
    return score["nll"], score["tokens"]


def mean_pooled_logits(hf, ids, types):
    """The mean-pooled head by hand on transformers' encoder: the mean of the last hidden states
    over the row's positions (one row: no padding), then BERT's pooler dense + tanh and classifier."""
    hidden = hf.bert(torch.tensor([ids]), token_type_ids=torch.tensor([types])).last_hidden_state[0]
    return hf.classifier(torch.tanh(hf.bert.pooler.dense(hidden.mean(0))))[None]


def check_classifier(args, lines):
    """transformers' BertForSequenceClassification on normlab's export, against `normlab score` of a
    classifier: rows A </s> B </s> (pairs of the random lines, padded in normlab's batch) and one
    class id each. The same classifier with --classifier-pooling mean (same seed: the same weights,
    checked) against the mean of transformers' last hidden states through the same head by hand."""
    work = args.workdir / "bert-classifier"
    work.mkdir(parents=True, exist_ok=True)
    checkpoint, mean_checkpoint = work / "model.ckpt", work / "mean.ckpt"
    run(args.normlab, "init", *SIZES, *CLASSIFIER, "--out", checkpoint)
    run(args.normlab, "init", *SIZES, *CLASSIFIER, "--classifier-pooling", "mean", "--out", mean_checkpoint)
    run(args.normlab, "export", "--checkpoint", checkpoint, "--format", "hf", "--out", work / "hf")
    hf = BertForSequenceClassification.from_pretrained(work / "hf").eval()
    failures = []
    for ckpt in (checkpoint, mean_checkpoint):
        run(args.normlab, "export", "--checkpoint", ckpt, "--out", ckpt.with_suffix(".pt"))
    cls_state, mean_state = (load_weights(ckpt.with_suffix(".pt"))[0] for ckpt in (checkpoint, mean_checkpoint))
    if cls_state.keys() != mean_state.keys() or any(not torch.equal(cls_state[k], mean_state[k]) for k in cls_state):
        failures.append("bert-classifier: --classifier-pooling mean changed the weights of the same seed")
    pairs = [(lines[0], lines[1]), (lines[2], []), (lines[1], lines[2]), (lines[3][:8], lines[0])]
    given = [a + [EOS] + (b + [EOS] if b else []) for a, b in pairs]
    labels = [[i % 3] for i in range(len(given))]
    nll = {"cls": 0.0, "mean": 0.0}
    with torch.no_grad():
        for row, label in zip(given, labels):
            ids = [BOS] + row
            first_eos = ids.index(EOS)
            types = [0 if j <= first_eos else 1 for j in range(len(ids))]
            logits = {"cls": hf(torch.tensor([ids]), token_type_ids=torch.tensor([types])).logits,
                      "mean": mean_pooled_logits(hf, ids, types)}
            for pooling, value in logits.items():
                nll[pooling] += torch.nn.functional.cross_entropy(value.double(), torch.tensor(label)).item()
    if abs(nll["cls"] - nll["mean"]) < 1e-3 * nll["cls"]:
        failures.append(f"bert-classifier: the two poolings' losses do not differ ({nll}): the check cannot tell them")
    for pooling, ckpt in (("cls", checkpoint), ("mean", mean_checkpoint)):
        ours, examples = classifier_score(args, work, ckpt, pairs, labels)
        error = abs(ours - nll[pooling]) / nll[pooling]
        if error > NLL_TOLERANCE or examples != len(given):
            failures.append(f"bert-classifier ({pooling}): normlab score nll {ours} over {examples} examples, "
                            f"transformers {nll[pooling]} over {len(given)}: relative error {error:.3g}")
        print(f"bert-classifier ({pooling}): nll normlab {ours:.6f} transformers {nll[pooling]:.6f}")
    print(f"bert-classifier: transformers loaded {sum(p.numel() for p in hf.parameters())} parameters")
    return failures


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--normlab", required=True)
    parser.add_argument("--workdir", required=True, type=Path)
    args = parser.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    lines = random_lines(17)
    failures = []
    for name, flags in CASES.items():
        failures += check_case(args, name, flags, lines)
    failures += check_classifier(args, lines)
    for name, (flags, message) in REFUSED.items():
        checkpoint = args.workdir / f"{name}.ckpt"
        run(args.normlab, "init", *SIZES, *flags, "--out", checkpoint)
        result = run(args.normlab, "export", "--checkpoint", checkpoint, "--format", "hf",
                     "--out", args.workdir / f"{name}-hf", expect=2)
        if message not in result.stderr or len(result.stderr.strip().splitlines()) != 1:
            failures.append(f"{name}: expected one line with {message!r}, got {result.stderr!r}")
    if failures:
        sys.exit("FAIL:\n  " + "\n  ".join(failures))
    print("PASS: transformers' GPT2LMHeadModel and BertForMaskedLM give the reference's logits and normlab's loss; "
          "BertForSequenceClassification normlab's classifier loss")


if __name__ == "__main__":
    main()
