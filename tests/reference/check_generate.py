#!/usr/bin/env python3
"""ctest driver: `normlab generate` against the PyTorch reference model and Hugging Face's
logits processors.

A float64 decoder-only model (`normlab init`, weights exported and loaded into
reference_model.py) continues id prompts of several lengths, one of them empty:
  greedy   every token is the argmax of the reference's full (uncached) forward over the context
           `</s> prompt continuation`, after the tokens normlab never emits (<s>, <pad>, <unk>;
           </s> before --min-len); each positional score is the reference's log p (1e-9);
           continuations stop at </s> or --max-new-tokens, and with --ignore-eos go on past </s>.
  beam     the hypotheses and scores of tests/decode/check_beam.py's independent search (fairseq
           semantics, full forward, no cache) from `</s> prompt`; every positional score is the
           reference's log p of its token and of the final </s>.
  sampling the first token's empirical distribution over 6000 draws matches the reference's
           probabilities after transformers' TemperatureLogitsWarper, TopKLogitsWarper and
           TopPLogitsWarper (no token outside their support; chi-square below the 1e-6
           quantile); the same seed repeats the text, another seed changes it.
  cache    a prompt filling all but one position gets one token, with a note on stderr.
"""

import argparse
import json
import math
import subprocess
import sys
from pathlib import Path

import torch
from transformers.generation.logits_process import TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "decode"))
from check_beam import reference_beam_search  # noqa: E402
from reference_model import ReferenceTransformer, load_weights  # noqa: E402

VOCAB, MAX_POSITIONS = 29, 24
BOS, PAD, EOS, UNK = 0, 1, 2, 3
PROMPTS = [[5, 9, 11], [], [7], [4, 4, 20, 13, 8, 6], [12, 5, 9]]  # two of length 3 share a batch
MAX_NEW = 7
TOLERANCE = 1e-9
SAMPLES = 6000
CHI2_LIMIT = 60.0  # above the 1-1e-6 quantile of chi-square for the <= 12 degrees of freedom here


def run(binary, *args, expect=0):
    command = [binary, *map(str, args)]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != expect:
        sys.exit(f"FAIL: {' '.join(command)} exited with {result.returncode}\n{result.stdout}{result.stderr}")
    return result


def generate(args, checkpoint, prompts_file, *options):
    out = run(args.normlab, "generate", "--checkpoint", checkpoint, "--ids", "--input", prompts_file,
              "--format", "jsonl", *options).stdout
    rows = [json.loads(line) for line in out.splitlines()]
    by_prompt = {}
    for row in rows:
        by_prompt.setdefault(row["prompt"], []).append(row)
    return by_prompt


def reference_log_probs(model, context):
    """log p of the next token after `context` (a list of ids), from the full forward."""
    tokens = torch.tensor([context], dtype=torch.long)
    return torch.log_softmax(model(None, tokens)[0, -1], -1)


def banned(step, min_len):
    return [BOS, PAD, UNK] + ([EOS] if step < min_len else [])


def check_greedy(model, rows, prompts, min_len, ignore_eos):
    failures = []
    for p, prompt in enumerate(prompts, 1):
        (row,) = rows[p]
        context, expected, scores = [EOS] + prompt, [], []
        for step in range(MAX_NEW):
            logp = reference_log_probs(model, context)
            masked = logp.clone()
            masked[banned(step, min_len)] = -math.inf
            token = int(masked.argmax())
            scores.append(float(logp[token]))
            if token == EOS and not ignore_eos:
                break
            expected.append(token)
            context.append(token)
        if row["tokens"] != expected:
            failures.append(f"prompt {p}: greedy tokens {row['tokens']}, reference {expected}")
            continue
        worst = max(abs(a - b) for a, b in zip(row["positional_scores"], scores))
        if len(row["positional_scores"]) != len(scores) or worst > TOLERANCE:
            failures.append(f"prompt {p}: positional scores {row['positional_scores']}, reference {scores}")
    return failures


def check_beam(model, rows, prompts, beam, lenpen):
    """Each prompt's hypotheses: those of tests/decode/check_beam.py's fairseq-semantics search
    over the reference's full forward, with their scores; positional scores the reference's."""
    failures = []
    for p, prompt in enumerate(prompts, 1):
        hyps = rows[p]
        expected = reference_beam_search(lambda prefix: reference_log_probs(model, prefix), [EOS] + prompt, beam,
                                         lenpen, MAX_NEW)
        got = [(h["tokens"], h["score"]) for h in hyps]
        if [t for t, _ in got] != [t for t, _ in expected] or \
                any(abs(a - b) > TOLERANCE for (_, a), (_, b) in zip(got, expected)):
            failures.append(f"prompt {p}: hypotheses {got}, reference {expected}")
            continue
        for h in hyps:
            context, scores = [EOS] + prompt, []
            for token in h["tokens"] + [EOS]:
                scores.append(float(reference_log_probs(model, context)[token]))
                context.append(token)
            if not h["ended"] or len(h["positional_scores"]) != len(scores) or \
                    max(abs(a - b) for a, b in zip(h["positional_scores"], scores)) > TOLERANCE:
                failures.append(f"prompt {p}: {h['tokens']} positional scores {h['positional_scores']}, "
                                f"reference {scores}")
    return failures


def sampling_probs(model, prompt, temperature, top_k, top_p):
    """The first token's probabilities under transformers' processors, in their order."""
    scores = reference_log_probs(model, [EOS] + prompt).float().unsqueeze(0)
    scores[0, banned(0, 1)] = -math.inf
    for warper in (TemperatureLogitsWarper(temperature), TopKLogitsWarper(top_k), TopPLogitsWarper(top_p)):
        scores = warper(None, scores)
    return torch.softmax(scores[0].double(), -1)


def check_sampling(model, rows, prompt, probs):
    counts = torch.zeros(VOCAB, dtype=torch.float64)
    for row in rows:
        counts[row["tokens"][0]] += 1
    outside = [t for t in range(VOCAB) if counts[t] > 0 and probs[t] == 0]
    if outside:
        return [f"sampled tokens {outside} that top-k/top-p exclude"]
    support = probs > 0
    expected = probs[support] * len(rows)
    chi2 = float(((counts[support] - expected) ** 2 / expected).sum())
    print(f"sampling: support {int(support.sum())} tokens, chi-square {chi2:.2f} over {len(rows)} draws")
    return [] if chi2 < CHI2_LIMIT else [f"chi-square {chi2:.1f} >= {CHI2_LIMIT}: counts {counts[support].tolist()}, "
                                         f"expected {expected.tolist()}"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--normlab", required=True)
    parser.add_argument("--workdir", required=True, type=Path)
    parser.add_argument("--scheme", default="pre-ln")
    args = parser.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    checkpoint, weights = args.workdir / "model.ckpt", args.workdir / "weights.pt"
    run(args.normlab, "init", "--model-kind", "decoder-only", "--scheme", args.scheme, "--d-model", 16,
        "--ffn-dim", 24, "--heads", 2, "--layers", 2, "--vocab-size", VOCAB, "--max-positions", MAX_POSITIONS,
        "--seed", 11, "--dtype", "float64", "--out", checkpoint)
    run(args.normlab, "export", "--checkpoint", checkpoint, "--out", weights)
    state, config = load_weights(weights)
    model = ReferenceTransformer(config).double().eval()
    model.load_state_dict(state, strict=True)
    prompts_file = args.workdir / "prompts.ids"
    prompts_file.write_text("".join(" ".join(map(str, p)) + "\n" for p in PROMPTS))

    failures = []
    with torch.no_grad():
        for min_len, ignore in ((1, False), (0, False), (3, True)):
            rows = generate(args, checkpoint, prompts_file, "--max-new-tokens", MAX_NEW, "--min-len", min_len,
                            *(["--ignore-eos"] if ignore else []))
            failures += [f"greedy min-len {min_len}: {f}" for f in check_greedy(model, rows, PROMPTS, min_len, ignore)]
        rows = generate(args, checkpoint, prompts_file, "--beam", 4, "--nbest", 4, "--lenpen", 0.7,
                        "--max-new-tokens", MAX_NEW)
        failures += [f"beam: {f}" for f in check_beam(model, rows, PROMPTS, 4, 0.7)]

        one = args.workdir / "one.ids"
        one.write_text("6 10\n")
        draw = ["--sampling", "--temperature", 0.7, "--top-k", 12, "--top-p", 0.9, "--num-samples", SAMPLES,
                "--max-new-tokens", 1, "--seed", 5]
        rows = generate(args, checkpoint, one, *draw)[1]
        failures += check_sampling(model, rows, [6, 10], sampling_probs(model, [6, 10], 0.7, 12, 0.9))
        long_draw = ["--sampling", "--num-samples", 3, "--max-new-tokens", 6, "--ignore-eos"]
        first = generate(args, checkpoint, prompts_file, *long_draw, "--seed", 5)
        if generate(args, checkpoint, prompts_file, *long_draw, "--seed", 5) != first:
            failures.append("the same seed gave different samples")
        if generate(args, checkpoint, prompts_file, *long_draw, "--seed", 6) == first:
            failures.append("seeds 5 and 6 gave the same samples")

        full = args.workdir / "full.ids"
        full.write_text(" ".join(["5"] * (MAX_POSITIONS - 1)) + "\n")
        result = run(args.normlab, "generate", "--checkpoint", checkpoint, "--ids", "--input", full,
                     "--format", "jsonl", "--max-new-tokens", 5, "--ignore-eos")
        row = json.loads(result.stdout)
        if len(row["tokens"]) != 1 or "room for 1 new tokens" not in result.stderr:
            failures.append(f"a prompt of max_positions - 1 tokens: {row['tokens']}, stderr {result.stderr!r}")

    if failures:
        sys.exit("FAIL:\n  " + "\n  ".join(failures))
    print("PASS: greedy, beam and sampling agree with the reference and transformers' processors")


if __name__ == "__main__":
    main()
