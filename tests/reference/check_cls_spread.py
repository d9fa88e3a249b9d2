#!/usr/bin/env python3
"""ctest driver: scripts/cls_spread.py against transformers (docs/results.md, Fig. 5 at 10,000 updates).

A float32 encoder-only Post-LN model in BERT's form, Xavier-initialised (under BERT's N(0, 0.02)
the spread at `<s>` is ~1e-5 at initialisation: too small for 4 printed decimals to test), is made
with `normlab init` and exported twice:
as weights.pt for cls_spread.py (which runs the tests' reference model on a padded batch) and as
a Hugging Face folder that `transformers`' BertModel loads. On 12 random id lines of 4-15 ids the
spread mean ||h_i - mean h||^2 / mean ||h_i||^2 of the last hidden state across the lines, at
`<s>` and at position 3, is recomputed from BertModel, one line at a time (no padding), and must
equal the printed values (4 decimals). Refused with one line and exit 1: a decoder-only model,
and an ids file with a line that is not token ids (FILE:LINE).
"""

import argparse
import random
import re
import sys
from pathlib import Path

import torch
from transformers import BertModel

sys.path.insert(0, str(Path(__file__).resolve().parent))
from check_hf_export import run  # noqa: E402

VOCAB, BOS, EOS = 41, 0, 2
SIZES = ["--d-model", 32, "--ffn-dim", 48, "--heads", 4, "--layers", 2, "--vocab-size", VOCAB,
         "--max-positions", 24, "--dtype", "float32", "--seed", 4]
ENCODER = ["--model-kind", "encoder-only", "--scheme", "post-ln", "--form", "bert", "--init", "xavier"]
SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "cls_spread.py"


def spread(h):
    return ((h - h.mean(0)).pow(2).sum(1).mean() / h.pow(2).sum(1).mean()).item()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--normlab", required=True)
    parser.add_argument("--workdir", required=True, type=Path)
    args = parser.parse_args()
    work = args.workdir
    work.mkdir(parents=True, exist_ok=True)
    checkpoint = work / "model.ckpt"
    run(args.normlab, "init", *SIZES, *ENCODER, "--out", checkpoint)
    run(args.normlab, "export", "--checkpoint", checkpoint, "--out", work / "weights.pt")
    run(args.normlab, "export", "--checkpoint", checkpoint, "--format", "hf", "--out", work / "hf")
    rng = random.Random(9)
    lines = [[rng.randrange(4, VOCAB - 1) for _ in range(rng.randrange(4, 16))] for _ in range(12)]
    ids = work / "lines.ids"
    ids.write_text("".join(" ".join(map(str, line)) + "\n" for line in lines))
    out = run(sys.executable, SCRIPT, work / "weights.pt", ids, "--lines", 12, "--position", 3).stdout
    printed = re.search(r"12 lines; spread at <s> ([0-9.]+), at position 3 ([0-9.]+)", out)

    hf = BertModel.from_pretrained(work / "hf", add_pooling_layer=False).eval()
    with torch.no_grad():
        states = [hf(torch.tensor([[BOS] + line + [EOS]])).last_hidden_state[0].double() for line in lines]
    theirs = [spread(torch.stack([h[position] for h in states])) for position in (0, 3)]
    failures = []
    if not printed or any(abs(float(p) - t) > 1e-4 for p, t in zip(printed.groups(), theirs)):
        failures.append(f"cls_spread.py printed {out.strip()!r}; transformers gives <s> {theirs[0]:.4f}, "
                        f"position 3 {theirs[1]:.4f}")
    if theirs[0] < 1e-3:
        failures.append(f"the spread at <s> is {theirs[0]:.2g}: a random model should vary there")

    decoder = work / "decoder.ckpt"
    run(args.normlab, "init", *SIZES, "--model-kind", "decoder-only", "--scheme", "pre-ln", "--out", decoder)
    run(args.normlab, "export", "--checkpoint", decoder, "--out", work / "decoder.pt")
    bad = work / "bad.ids"
    bad.write_text("5 6 7 8\n5 six 7 8\n")
    for command, needle in (([work / "decoder.pt", ids], "not an encoder-only model"),
                            ([work / "weights.pt", bad], f"{bad}:2")):
        result = run(sys.executable, SCRIPT, *command, expect=1)
        if needle not in result.stderr or len(result.stderr.strip().splitlines()) != 1:
            failures.append(f"cls_spread.py {command}: expected one line with {needle!r}, got {result.stderr!r}")
    if failures:
        sys.exit("FAIL:\n  " + "\n  ".join(failures))
    print(f"PASS: cls_spread.py {printed.group(1)} / {printed.group(2)}, transformers {theirs[0]:.4f} / {theirs[1]:.4f}")


if __name__ == "__main__":
    main()
