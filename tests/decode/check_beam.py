#!/usr/bin/env python3
"""ctest driver: `normlab translate --ids` against an independent PyTorch beam search.

The reference below is written from fairseq's SequenceGenerator semantics as docs/translate.md
states them, one sentence at a time, with a full forward pass of reference_model.py (float64,
no cache) over every prefix: nothing is shared with the C++ (its batching, its cache, its
vectorised bookkeeping). On a small random float64 model (vocabulary 12, so that </s> is
likely and hypotheses end at many lengths) it compares, for beam 1 and 5 and lenpen 0.6, 1.0
and 1.5, every returned hypothesis (--nbest = beam) and its score, for sentences batched by a
small --max-tokens with empty lines among them (which must stay empty, in place).
"""

import argparse
import math
import random
import subprocess
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "reference"))
from reference_model import ReferenceTransformer, load_weights  # noqa: E402

VOCAB = 12
BOS, PAD, EOS, UNK = 0, 1, 2, 3
LENGTHS = [5, 0, 1, 8, 3, 0, 6, 2]  # source lengths; 0 is an empty line
CASES = [  # (beam, lenpen, max_len_a, max_len_b)
    (1, 1.0, 0.0, 12), (5, 0.6, 0.0, 12), (5, 1.0, 0.0, 12), (5, 1.5, 0.0, 12), (5, 1.0, 1.0, 2),
]
TOLERANCE = 1e-9


def run(command, **kw):
    result = subprocess.run([str(c) for c in command], capture_output=True, text=True, **kw)
    if result.returncode != 0:
        sys.exit(f"FAIL: {' '.join(map(str, command))} exited with {result.returncode}\n{result.stderr}")
    return result.stdout


def reference_beam_search(log_probs, start, beam, lenpen, max_len, min_len=1):
    """fairseq semantics for one sentence: `log_probs(prefix)` is the next token's log p after
    the decoder input `prefix` (a list of ids), `start` the input before the first output token
    (`</s>` for translation, `</s> prompt` for a language model), at most `max_len` tokens before
    </s>. Returns [(tokens after start, score)], best first, up to `beam` of them."""
    beams = [(list(start), 0.0)]  # (decoder input so far, cumulative log p)
    finished = []
    for step in range(max_len + 1):
        candidates = []  # (cumulative score, beam index, token)
        for b, (prefix, score) in enumerate(beams if step > 0 else beams[:1]):
            lp = log_probs(prefix)
            for v in range(len(lp)):
                x = lp[v].item()
                if v in (BOS, PAD, UNK) or (step >= max_len and v != EOS) or (step < min_len and v == EOS):
                    x = -math.inf
                candidates.append((score + x, b, v))
        candidates.sort(key=lambda c: -c[0])
        candidates = candidates[:min(2 * beam, len(candidates) - 1)]
        is_end = [v == EOS and s > -math.inf for s, _, v in candidates]
        # An end among the first `beam` candidates finishes a hypothesis; len counts </s>.
        for (s, b, v), end in zip(candidates[:beam], is_end[:beam]):
            if end and len(finished) < beam:
                finished.append((beams[b][0][len(start):], s / (step + 1) ** lenpen))
        if len(finished) >= beam or step >= max_len:
            break
        # The next beams: the first `beam` candidates that did not end.
        beams = [(beams[b][0] + [v], s) for (s, b, v), end in zip(candidates, is_end) if not end][:beam]
    return sorted(finished, key=lambda h: -h[1])


def translation_beam_search(model, src, beam, lenpen, max_len_a, max_len_b):
    """reference_beam_search of the translation of `src` (ids without </s>)."""
    source = torch.tensor([src + [EOS]])

    def log_probs(prefix):
        with torch.no_grad():
            return torch.log_softmax(model(source, torch.tensor([prefix]))[0, -1], dim=-1)

    return reference_beam_search(log_probs, [EOS], beam, lenpen, int(max_len_a * (len(src) + 1) + max_len_b))


def parse_translate_output(text, n_lines, nbest):
    """nbest lines per input line: "score<TAB>ids", or empty for an empty input line."""
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    if len(lines) != n_lines * nbest:
        sys.exit(f"FAIL: {len(lines)} output lines, expected {n_lines} x {nbest}")
    out = []
    for i in range(n_lines):
        hyps = []
        for line in lines[i * nbest:(i + 1) * nbest]:
            if line:
                score, ids = line.split("\t")
                hyps.append(([int(t) for t in ids.split()], float(score)))
        out.append(hyps)
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--normlab", required=True)
    parser.add_argument("--workdir", required=True, type=Path)
    parser.add_argument("--scheme", default="pre-ln")
    args = parser.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(1)  # tiny tensors: more threads only contend (77 ms vs 2 ms a forward on 2 busy cores)
    checkpoint, weights, src_path = (args.workdir / n for n in ("model.ckpt", "weights.pt", "src.ids"))
    run([args.normlab, "init", "--scheme", args.scheme, "--d-model", 16, "--ffn-dim", 24, "--heads", 2,
         "--encoder-layers", 2, "--decoder-layers", 2, "--vocab-size", VOCAB, "--share", "all",
         "--dtype", "float64", "--seed", 11, "--out", checkpoint])
    run([args.normlab, "export", "--checkpoint", checkpoint, "--out", weights])
    rng = random.Random(5)
    sources = [[rng.randrange(4, VOCAB) for _ in range(n)] for n in LENGTHS]
    src_path.write_text("".join(" ".join(map(str, s)) + "\n" for s in sources))
    state, config = load_weights(weights)
    model = ReferenceTransformer(config).double().eval()
    model.load_state_dict(state, strict=True)

    failures, compared, lengths = [], 0, set()
    for beam, lenpen, a, b in CASES:
        out = run([args.normlab, "translate", "--checkpoint", checkpoint, "--ids", "--input", src_path,
                   "--beam", beam, "--nbest", beam, "--lenpen", lenpen, "--max-len-a", a, "--max-len-b", b,
                   "--max-tokens", 12, "--scores", "--threads", 1])
        got = parse_translate_output(out, len(sources), beam)
        for i, src in enumerate(sources):
            case = f"beam {beam} lenpen {lenpen} max_len {a}*len+{b} line {i + 1}"
            expected = translation_beam_search(model, src, beam, lenpen, a, b) if src else []
            if [h[0] for h in got[i]] != [h[0] for h in expected]:
                failures.append(f"{case}: normlab {got[i]}\n    reference {expected}")
                continue
            for (_, s), (_, r) in zip(got[i], expected):
                if abs(s - r) > TOLERANCE * max(1.0, abs(r)):
                    failures.append(f"{case}: score {s!r}, reference {r!r}")
            compared += len(expected)
            lengths.update(len(h[0]) for h in expected)
    if len(lengths) < 4:  # the test must see hypotheses of many lengths, not only max_len ones
        failures.append(f"hypothesis lengths {sorted(lengths)}: too few distinct lengths to test ending")
    if failures:
        print("FAIL:\n  " + "\n  ".join(failures))
        sys.exit(1)
    print(f"OK: {compared} hypotheses (tokens and scores) equal the reference over {len(CASES)} settings; "
          f"lengths seen {sorted(lengths)}")


if __name__ == "__main__":
    main()
