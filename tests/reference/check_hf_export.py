#!/usr/bin/env python3
"""ctest driver: `normlab export --format hf` loads into Hugging Face transformers as it is.

For each case a float32 decoder-only model is made with `normlab init`, exported as a folder,
and loaded with transformers' own `GPT2LMHeadModel.from_pretrained` (no normlab code on that
side). On random id lines (read as `</s> y`, predicting `y </s>`) transformers' logits must equal
the PyTorch reference model's (reference_model.py on `normlab export`'s weights.pt; 1e-5), and
transformers' summed cross-entropy must equal `normlab score`'s nll (relative 1e-5):
  gpt2-tied      --form gpt2 (learned positions, GELU-tanh, unscaled tokens, GPT-2's init), tied
  sinusoid-gelu  sinusoidal positions (written as wpe), erf GELU, --no-scale-embedding, untied
A fairseq-form model (tokens x sqrt(C)) and a Post-LN one are refused with one line, exit 2.
"""

import argparse
import json
import random
import subprocess
import sys
from pathlib import Path

import torch
from transformers import GPT2LMHeadModel

sys.path.insert(0, str(Path(__file__).resolve().parent))
from reference_model import ReferenceTransformer, load_weights  # noqa: E402

VOCAB, EOS = 41, 2
SIZES = ["--d-model", 32, "--ffn-dim", 48, "--heads", 4, "--layers", 2, "--vocab-size", VOCAB,
         "--max-positions", 20, "--dtype", "float32", "--seed", 3]
CASES = {
    "gpt2-tied": ["--scheme", "pre-ln", "--form", "gpt2"],
    "sinusoid-gelu": ["--scheme", "pre-ln", "--activation", "gelu", "--no-scale-embedding", "--share", "none"],
}
REFUSED = {
    "fairseq-form": (["--scheme", "pre-ln"], "token embeddings scaled by sqrt(C)"),
    "post-ln": (["--scheme", "post-ln", "--form", "gpt2"], "norm placement post (GPT-2 is pre)"),
}
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


def check_case(args, name, flags, lines, ids_file):
    work = args.workdir / name
    work.mkdir(parents=True, exist_ok=True)
    checkpoint = work / "model.ckpt"
    run(args.normlab, "init", "--model-kind", "decoder-only", *SIZES, *flags, "--out", checkpoint)
    run(args.normlab, "export", "--checkpoint", checkpoint, "--format", "hf", "--out", work / "hf")
    run(args.normlab, "export", "--checkpoint", checkpoint, "--out", work / "weights.pt")
    hf = GPT2LMHeadModel.from_pretrained(work / "hf").eval()
    state, config = load_weights(work / "weights.pt")
    reference = ReferenceTransformer(config).eval()
    reference.load_state_dict(state, strict=True)
    score = json.loads([line for line in run(args.normlab, "score", "--checkpoint", checkpoint, "--tgt-ids", ids_file,
                                             "--label-smoothing", 0, "--json").stdout.splitlines()
                        if line.startswith("{")][-1])
    failures, nll = [], 0.0
    with torch.no_grad():
        for line in lines:
            inputs = torch.tensor([[EOS] + line])
            theirs = hf(inputs).logits[0]
            ours = reference(None, inputs)[0].float()
            worst = (theirs - ours).abs().max().item()
            if worst > LOGIT_TOLERANCE:
                failures.append(f"{name}: line {line}: transformers' logits differ from the reference's by {worst:.3g}")
            targets = torch.tensor(line + [EOS])
            nll += torch.nn.functional.cross_entropy(theirs.double(), targets, reduction="sum").item()
    error = abs(score["nll"] - nll) / nll
    if error > NLL_TOLERANCE:
        failures.append(f"{name}: normlab score nll {score['nll']}, transformers {nll}: relative error {error:.3g}")
    print(f"{name}: transformers loaded {sum(p.numel() for p in hf.parameters())} parameters; "
          f"nll normlab {score['nll']:.6f} transformers {nll:.6f}")
    return failures


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--normlab", required=True)
    parser.add_argument("--workdir", required=True, type=Path)
    args = parser.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    lines = random_lines(17)
    ids_file = args.workdir / "lines.ids"
    ids_file.write_text("".join(" ".join(map(str, line)) + "\n" for line in lines))
    failures = []
    for name, flags in CASES.items():
        failures += check_case(args, name, flags, lines, ids_file)
    for name, (flags, message) in REFUSED.items():
        checkpoint = args.workdir / f"{name}.ckpt"
        run(args.normlab, "init", "--model-kind", "decoder-only", *SIZES, *flags, "--out", checkpoint)
        result = run(args.normlab, "export", "--checkpoint", checkpoint, "--format", "hf",
                     "--out", args.workdir / f"{name}-hf", expect=2)
        if message not in result.stderr or len(result.stderr.strip().splitlines()) != 1:
            failures.append(f"{name}: expected one line with {message!r}, got {result.stderr!r}")
    if failures:
        sys.exit("FAIL:\n  " + "\n  ".join(failures))
    print("PASS: transformers' GPT2LMHeadModel gives the reference's logits and normlab's loss")


if __name__ == "__main__":
    main()
