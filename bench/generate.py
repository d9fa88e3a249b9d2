#!/usr/bin/env python3
"""Generation speed of `normlab generate` against a nanoGPT-style script and transformers (issue 35 §5).

One decoder-only model in GPT-2's form (`normlab init --model-kind decoder-only --form gpt2
--scheme pre-ln`, --preset's decoder depth, random weights, dropout 0), exported with `normlab
export --format hf`, continues --prompts prompts of --prompt-length random ids (seeded) by
exactly --max-new-tokens tokens, greedily, on the CPU. Every side decodes from the context
`</s> prompt` as `normlab generate` does (docs/generate.md) and picks the same way: <s>, <pad>
and <unk> never, </s> not as the first new token (normlab's --min-len 1), and a </s> does not
end the continuation (normlab's --ignore-eos), so every side generates the same count.

Configurations (a subset with --configs; the bf16 ones by default only where `normlab info`
reports native bf16):
  normlab-fp32, normlab-bf16  `normlab generate --ids --format jsonl --ignore-eos` (--precision);
                              its decoder cache, the prompt in one forward pass;
  nanogpt-fp32                nanoGPT's own generate loop (nanogpt_peer.py): the whole context
                              through the model for every new token, no cache;
  nanogpt-kv-fp32, -bf16      the same model with a key/value cache (nanogpt_peer.py's
                              generate_cached: one forward over the prompt, then a token a step);
  hf-fp32, hf-bf16            transformers' GPT2LMHeadModel.from_pretrained(export).generate(
                              do_sample=False, max_new_tokens=N, use_cache=True) with
                              suppress_tokens <s>, <pad>, <unk>, begin_suppress_tokens </s> and no
                              eos_token_id (so a </s> does not stop it).
The PyTorch sides run under torch.inference_mode(), bf16 as torch.autocast("cpu", bfloat16)
around the generate call (its casts of the weights, once a call, timed with it; normlab casts
before its clock starts), with normlab's intra-op thread count (--threads). Each run is a fresh
process (this script re-runs itself with --peer); runs go round-robin over the configurations,
--repeats times, and medians are reported. Timed: generation only, model loading excluded, no
warm-up on any side (normlab's own figure from its stderr line; the peers time their generate
call). Correctness: each configuration's greedy tokens are compared with normlab fp32's, the
count of agreeing leading tokens reported (the smallest over prompts and runs); an fp32 peer
that disagrees within the first 8 tokens (or --max-new-tokens, if fewer) stops the bench, as it
means the sides are set up differently (random weights give near-ties later on). Writes a table
to docs/performance.md between markers, with the machine and date, and the raw results to
--json-out if given.
"""
import argparse
import datetime
import importlib.metadata
import json
import os
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
import nanogpt_peer  # noqa: E402
from doc_block import cpu_name, write_block  # noqa: E402
from train_step import peer_main, round_robin, run_json  # noqa: E402

BOS, PAD, EOS, UNK = 0, 1, 2, 3  # src/core/tokens.h
CONFIGS = {
    "normlab-fp32": "normlab generate fp32",
    "normlab-bf16": "normlab generate bf16",
    "nanogpt-fp32": "nanoGPT generate (no cache) fp32",
    "nanogpt-kv-fp32": "nanoGPT-style + KV cache fp32",
    "nanogpt-kv-bf16": "nanoGPT-style + KV cache, autocast bf16",
    "hf-fp32": "transformers generate fp32",
    "hf-bf16": "transformers generate, autocast bf16",
}
MUST_AGREE = 8  # leading tokens every fp32 configuration must share with normlab fp32
LOGP_TOLERANCE = 1e-3  # the largest |difference| of their log p over those in fp32


def greedy(scores):
    """normlab generate's greedy choice, as nanogpt_peer's `pick`: the most likely token, never
    <s>, <pad> or <unk>, and not </s> as the first new token (--min-len 1); appends the chosen
    tokens' log p over the whole vocabulary (normlab's positional scores) to `scores`."""
    def pick(logits, step):
        logp = torch.log_softmax(logits.float(), -1)
        banned = torch.tensor([BOS, PAD, UNK] + ([EOS] if step == 0 else []))
        chosen = logp.index_fill(1, banned, float("-inf")).argmax(-1, keepdim=True)
        scores.append(logp.gather(1, chosen))
        return chosen
    return pick


def peer_run(folder, prompts_file, name, max_new_tokens, threads):
    """One PyTorch configuration in this process: (B, N) new tokens and the generate call's time."""
    mode, precision = name.rsplit("-", 1)
    torch.set_num_threads(threads)
    prompts = torch.tensor([[EOS] + [int(t) for t in line.split()] for line in open(prompts_file)])
    if mode == "hf":
        import transformers
        model = transformers.GPT2LMHeadModel.from_pretrained(folder, dtype=torch.float32).eval()
        # A fresh config, not the export's (whose eos_token_id 2 would end a row at </s>).
        model.generation_config = transformers.GenerationConfig(
            do_sample=False, max_new_tokens=max_new_tokens, use_cache=True, pad_token_id=PAD,
            suppress_tokens=[BOS, PAD, UNK], begin_suppress_tokens=[EOS])
        # output_logits: the raw logits of each step, kept (not copied) for the log p check below
        generate = lambda: model.generate(prompts, attention_mask=torch.ones_like(prompts),  # noqa: E731
                                          return_dict_in_generate=True, output_logits=True)
    else:
        model = nanogpt_peer.GPT.from_hf_export(folder).eval()
        method = model.generate_cached if mode == "nanogpt-kv" else model.generate
        scores = []
        generate = lambda: method(prompts, max_new_tokens, greedy(scores))  # noqa: E731
    with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16"):
        t0 = time.perf_counter()
        out = generate()
        seconds = time.perf_counter() - t0
    tokens = (out.sequences if mode == "hf" else out)[:, prompts.size(1):]
    if tuple(tokens.shape) != (prompts.size(0), max_new_tokens):
        raise RuntimeError(f"generated {tuple(tokens.shape)} tokens, not {(prompts.size(0), max_new_tokens)}")
    if mode == "hf":
        scores = [torch.log_softmax(l.float(), -1).gather(1, t) for l, t in zip(out.logits, tokens.split(1, 1))]
    return {"config": name, "threads": torch.get_num_threads(), "seconds": seconds, "tokens": tokens.tolist(),
            "scores": torch.cat(scores, 1).tolist()}


def normlab_run(args, ckpt, prompts_file, precision, threads):
    """One `normlab generate` run: its time (from its stderr line) and tokens, or {"error"}."""
    proc = subprocess.run([args.normlab, "--threads", str(threads), "--device", "cpu", "generate", "--checkpoint",
                           ckpt, "--ids", "--input", prompts_file, "--format", "jsonl", "--ignore-eos",
                           "--max-new-tokens", str(args.max_new_tokens), "--precision", precision],
                          capture_output=True, text=True)
    tail = proc.stderr.strip().splitlines() or [f"exit status {proc.returncode}"]
    m = re.search(r"(\d+) new tokens .* in ([\d.]+) s: ([\d.]+) tokens/s", tail[-1])
    if proc.returncode or not m:
        return {"error": tail[-1]}
    hyps = sorted((json.loads(line) for line in proc.stdout.splitlines()), key=lambda h: h["prompt"])
    tokens, scores = [h["tokens"] for h in hyps], [h["positional_scores"] for h in hyps]
    if int(m[1]) != args.prompts * args.max_new_tokens or any(len(t) != args.max_new_tokens for t in tokens):
        return {"error": f"not {args.max_new_tokens} new tokens for each of {args.prompts} prompts: {tail[-1]}"}
    # tokens / rate: more digits than the seconds printed (%.2f)
    return {"config": f"normlab-{precision}", "threads": threads, "seconds": int(m[1]) / float(m[3]),
            "tokens": tokens, "scores": scores}


def slim(runs):
    """The raw runs as kept: the tokens and their log p of the first run only (the check above
    compared every run's), the times of all."""
    return [r if i == 0 else {k: v for k, v in r.items() if k not in ("tokens", "scores")} for i, r in enumerate(runs)]


def agreement(runs, reference):
    """The fewest leading tokens a continuation of `runs` shares with `reference`'s (a run), and
    the largest |difference| of their log p over those shared tokens."""
    shared, diff = [], 0.0
    for run in runs:
        for tokens, scores, ref_tokens, ref_scores in zip(run["tokens"], run["scores"], reference["tokens"],
                                                          reference["scores"]):
            n = next((i for i, (a, b) in enumerate(zip(tokens, ref_tokens)) if a != b), len(tokens))
            shared.append(n)
            diff = max([diff] + [abs(a - b) for a, b in zip(scores[:n], ref_scores[:n])])
    return min(shared), diff


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--normlab", default=os.path.join(HERE, "..", "build", "normlab"), help="build/normlab")
    ap.add_argument("--configs", help="comma list of " + ", ".join(CONFIGS) +
                    " (default: all, the bf16 ones only where normlab info reports native bf16)")
    ap.add_argument("--preset", default="iwslt-small", help="the model's size (its decoder depth)")
    ap.add_argument("--vocab-size", type=int, default=8000)
    ap.add_argument("--prompts", type=int, default=1, help="prompts B, decoded together")
    ap.add_argument("--prompt-length", type=int, default=16, help="ids per prompt L (</s> before them)")
    ap.add_argument("--max-new-tokens", type=int, default=128, help="new tokens per prompt N")
    ap.add_argument("--seed", type=int, default=1, help="the model's and the prompts' seed")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=0, help="0: what normlab picks")
    ap.add_argument("--out", default=os.path.join(HERE, "..", "docs", "performance.md"))
    ap.add_argument("--json-out", metavar="FILE", help="also write the raw results (tokens included) as JSON")
    ap.add_argument("--block", default="lm_generate",
                    help="the table's marker name in --out (one per scenario: lm_generate_long, ...)")
    ap.add_argument("--peer", nargs=2, metavar=("HF_FOLDER", "PROMPTS"), help=argparse.SUPPRESS)  # internal
    args = ap.parse_args()
    names = args.configs.split(",") if args.configs else list(CONFIGS)
    unknown = [n for n in names if n not in CONFIGS]
    if unknown:
        ap.error(f"unknown configuration(s) {', '.join(unknown)}; choose from {', '.join(CONFIGS)}")
    if min(args.prompts, args.prompt_length, args.max_new_tokens) < 1:
        ap.error("--prompts, --prompt-length and --max-new-tokens must be at least 1")
    if args.peer:
        return peer_main(lambda: peer_run(*args.peer, names[0], args.max_new_tokens, args.threads))
    if not os.access(args.normlab, os.X_OK):
        ap.error(f"no normlab binary at {args.normlab} (build it, or give --normlab)")

    info = json.loads(subprocess.run([args.normlab, "info", "--json", "--device", "cpu"], check=True,
                                     capture_output=True, text=True).stdout)
    threads = args.threads or info["intra_op_threads"]
    if not args.configs and not info["cpu_native_bf16"]:
        names = [n for n in names if not n.endswith("-bf16")]
    g = torch.Generator().manual_seed(args.seed)
    prompts = torch.randint(4, args.vocab_size, (args.prompts, args.prompt_length), generator=g).tolist()
    with tempfile.TemporaryDirectory() as tmp:
        ckpt, hf, prompts_file = (os.path.join(tmp, f) for f in ("m.ckpt", "hf", "prompts.txt"))
        for cmd in (["init", "--model-kind", "decoder-only", "--form", "gpt2", "--scheme", "pre-ln", "--preset",
                     args.preset, "--vocab-size", str(args.vocab_size), "--dropout", "0", "--seed", str(args.seed),
                     "--out", ckpt],
                    ["export", "--checkpoint", ckpt, "--format", "hf", "--out", hf]):
            proc = subprocess.run([args.normlab, *cmd], capture_output=True, text=True)
            if proc.returncode:
                sys.exit(f"normlab {cmd[0]} failed: {proc.stderr.strip()}")
        cfg = json.load(open(os.path.join(hf, "config.json")))
        if args.prompt_length + 1 + args.max_new_tokens > cfg["n_positions"]:
            sys.exit(f"</s>, {args.prompt_length} prompt ids and {args.max_new_tokens} new tokens do not fit the "
                     f"model's {cfg['n_positions']} positions")
        with open(prompts_file, "w") as f:
            f.writelines(" ".join(map(str, p)) + "\n" for p in prompts)

        def run(name):
            if name.startswith("normlab"):
                return normlab_run(args, ckpt, prompts_file, name.rsplit("-", 1)[1], threads)
            return run_json([sys.executable, os.path.abspath(__file__), "--peer", hf, prompts_file, "--configs", name,
                             "--max-new-tokens", str(args.max_new_tokens), "--threads", str(threads)], "seconds")
        runs, errors = round_robin(names, args.repeats, run, CONFIGS, lambda r: f"{r['seconds']:.3f} s")

    new_tokens = args.prompts * args.max_new_tokens
    median = {n: statistics.median(r["seconds"] for r in runs[n]) for n in names if n not in errors}
    reference = runs["normlab-fp32"][0] if "normlab-fp32" in median else None
    agree = {n: agreement(runs[n], reference) for n in median} if reference else {}
    cpu, today = cpu_name(), str(datetime.date.today())
    hf_version = importlib.metadata.version("transformers")
    command = f"python3 bench/generate.py {shlex.join(sys.argv[1:])}"
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump({"date": today, "cpu": cpu, "torch": torch.__version__, "transformers": hf_version,
                       "threads": threads, "command": command, "args": vars(args), "model": cfg, "prompts": prompts,
                       "configs": {n: {"label": CONFIGS[n], "median_seconds": median.get(n),
                                       "new_tokens_per_s": new_tokens / median[n] if n in median else None,
                                       "agreeing_leading_tokens": agree.get(n, [None])[0],
                                       "max_logp_difference": agree.get(n, [None, None])[1], "error": errors.get(n),
                                       "runs": slim(runs[n])} for n in names}}, f, indent=1)
    must = min(MUST_AGREE, args.max_new_tokens)
    wrong = [f"{CONFIGS[n]} ({shared} tokens, |d log p| {diff:.1e})" for n, (shared, diff) in agree.items()
             if n.endswith("-fp32") and (shared < must or diff > LOGP_TOLERANCE)]
    if wrong:
        sys.exit(f"greedy tokens differ from normlab fp32's within the first {must}, or their log p by over "
                 f"{LOGP_TOLERANCE:g}: {', '.join(wrong)}; the sides are set up differently (no table written)")

    rows = []
    for n in names:
        raw = ", ".join(f"{r['seconds']:.3f}" for r in runs[n])
        if n in errors:
            rows.append(f"| {CONFIGS[n]} | failed: {errors[n].replace('|', '/')} | | | | | {raw} |")
            continue
        speed = f"{median['normlab-fp32'] / median[n]:.2f}x" if "normlab-fp32" in median else "-"
        shared, diff = (f"{agree[n][0]} / {args.max_new_tokens}", f"{agree[n][1]:.1e}") if n in agree else ("-", "-")
        rows.append(f"| {CONFIGS[n]} | {median[n]:.3f} | {new_tokens / median[n]:,.1f} | {speed} | {shared} | "
                    f"{diff} | {raw} |")
    text = (
        f"Decoder-only generation, `{args.preset}`'s decoder ({cfg['n_layer']} layers, d {cfg['n_embd']}, "
        f"{cfg['n_head']} heads, FFN {cfg['n_inner']}) pre-ln --form gpt2, random weights (seed {args.seed}, "
        f"V={args.vocab_size}); {args.prompts} prompt(s) of {args.prompt_length} random ids after </s>, greedy, "
        f"{args.max_new_tokens} new tokens each (</s> does not stop it; <s>, <pad>, <unk> never); {threads} threads, "
        f"{cpu}, torch {torch.__version__}, transformers {hf_version}, {today}; each run a fresh "
        f"process, configurations round-robin, median of {args.repeats} runs; generation only (loading excluded, "
        "no warm-up).\n\n"
        f"Command: `{command}`\n\n"
        "| configuration | s | new tokens/s | speed / normlab fp32 | leading tokens = normlab fp32's (fewest "
        "over prompts) | largest log p difference over those | runs (s) |\n"
        "|---|---:|---:|---:|---:|---:|---|\n" + "\n".join(rows) + "\n")
    print(text)
    write_block(args.out, args.block, text,
                heading="Decoder-only generation against a nanoGPT-style script and transformers (issue 35)")


if __name__ == "__main__":
    main()
