#!/usr/bin/env python3
"""Does an encoder's last hidden state at `<s>` depend on the input? (docs/results.md, Fig. 5 at 10,000 updates)

    normlab export --checkpoint CKPT --out W.pt
    normlab bpe encode --model RUN/vocab/spm.model --ids --input TEXT > IDS
    python3 scripts/cls_spread.py W.pt IDS [--lines 200] [--max-tokens 40] [--position 3]

Runs the exported encoder-only model (tests/reference/reference_model.py, PyTorch, eval mode) on
the first --lines lines of IDS, each as `<s>` + at most --max-tokens ids + `</s>` (lines of fewer
than 4 ids skipped), and prints the spread of the last hidden state across the lines,
mean ||h_i - mean h||^2 / mean ||h_i||^2, at `<s>` (what a classification head on `<s>` reads)
and at --position for contrast: 0 means the same vector for every input, 1 vectors of mean zero."""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "reference"))
from reference_model import ReferenceTransformer, key_padding, load_weights  # noqa: E402


def spread(h):
    return ((h - h.mean(0)).pow(2).sum(1).mean() / h.pow(2).sum(1).mean()).item()


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("weights")
    p.add_argument("ids")
    p.add_argument("--lines", type=int, default=200)
    p.add_argument("--max-tokens", type=int, default=40)
    p.add_argument("--position", type=int, default=3)
    a = p.parse_args()
    state, config = load_weights(a.weights)
    if config["model"].get("kind") != "encoder-only":
        sys.exit(f"cls_spread.py: {a.weights}: not an encoder-only model")
    special = config["special_tokens"]
    lines = []
    with open(a.ids) as f:
        for number, line in enumerate(f, start=1):
            try:
                ids = [int(t) for t in line.split()]
            except ValueError:
                sys.exit(f"cls_spread.py: {a.ids}:{number}: not a line of token ids (`bpe encode --ids`)")
            if len(ids) >= 4:
                lines.append([special["bos"]] + ids[:a.max_tokens] + [special["eos"]])
            if len(lines) == a.lines:
                break
    if len(lines) < 2 or a.position >= min(map(len, lines)):
        sys.exit(f"cls_spread.py: {a.ids}: need 2 lines of more than {a.position} tokens")
    x = torch.full((len(lines), max(map(len, lines))), special["pad"])
    for i, ids in enumerate(lines):
        x[i, :len(ids)] = torch.tensor(ids)
    model = ReferenceTransformer(config)
    model.load_state_dict({k: v for k, v in state.items() if k in model.state_dict()})
    model.eval()
    with torch.no_grad():
        h = model.encoder(x, key_padding(x, special["pad"])).double()
    print(f"{a.weights}: {len(lines)} lines; spread at <s> {spread(h[:, 0]):.4f}, at position {a.position} "
          f"{spread(h[:, a.position]):.4f}; mean norm at <s> {h[:, 0].norm(dim=1).mean():.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
