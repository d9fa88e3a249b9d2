#!/usr/bin/env python3
"""Training-step speed of normlab in fp32 and bf16 against the same model in PyTorch, one run.

Six configurations (a subset with --configs): normlab fp32 and bf16 (normlab_bench
--precision), and the PyTorch peer (tests/reference's ReferenceTransformer with
torch.optim.Adam) eager and under torch.compile(model), each in fp32 and with the standard
mixed-precision recipe: torch.autocast("cpu", dtype=torch.bfloat16) around forward and loss,
backward and optimizer step outside. All start from the same weights (normlab init + export)
and take the same random batch shape, label-smoothed loss, backward and Adam(0.9, 0.98, 1e-8)
with the same intra-op thread count. Every run is a fresh process (this script re-runs itself
with --peer for the PyTorch side); runs go round-robin over the configurations, --repeats
times, to spread machine noise, and medians are reported. A compiled model gets at least one
warm-up step, which compiles it; a PyTorch configuration that fails, or whose warm-up takes
longer than --compile-timeout seconds, is reported as failed with the reason and not run
again (a normlab failure stops the bench). The fp32 and bf16 GEMM peaks (torch.mm 2048^3) are
measured in this process at the same thread count. Writes a table to docs/performance.md
between markers, with the machine and date, and the raw results to --json-out if given.

--model-kind decoder-only (issue 35): a causal LM in GPT-2's form (--scheme pre-ln --form gpt2, the
preset's decoder depth) against a nanoGPT-style script of the same model (nanogpt_peer.py: fused
c_attn, F.scaled_dot_product_attention(is_causal=True), GELU-tanh, tied lm_head, weights from
`normlab export --format hf`), blocks of --length tokens, plain cross-entropy, AdamW (0.9, 0.95, weight
decay 0.1) on both sides, dropout --dropout (nanoGPT's default 0).

--device cuda runs every configuration on the GPU (autocast("cuda"); PyTorch's defaults, so fp32
products do not use TF32; steps timed after torch.cuda.synchronize) and measures the peaks there
with 8192^3 products; the table names the GPU. No GPU run has been made yet (docs/gpu.md).
"""
import argparse
import datetime
import json
import os
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import traceback

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "reference"))
import reference_model as ref  # noqa: E402

import nanogpt_peer  # noqa: E402
from doc_block import cpu_name, write_block
from timing import median_ms

# name (mode-precision) -> label; mode: normlab, eager or compile.
CONFIGS = {
    "normlab-fp32": "normlab fp32",
    "normlab-bf16": "normlab bf16",
    "eager-fp32": "PyTorch eager fp32",
    "eager-bf16": "PyTorch eager + autocast bf16",
    "compile-fp32": "torch.compile fp32",
    "compile-bf16": "torch.compile + autocast bf16",
}


def step_flops(cfg, B, S, T):
    """Matrix-multiply FLOPs of one training step: forward x 3 (backward is about 2x). A
    decoder-only model's layers have no cross-attention (and the causal scores are counted whole)."""
    C, F, V = cfg["d_model"], cfg["ffn_dim"], cfg["tgt_vocab_size"]
    cross = cfg.get("kind", "encoder-decoder") == "encoder-decoder"
    enc = cfg["encoder_layers"] * (4 * 2 * B * S * C * C + 2 * 2 * B * S * S * C + 2 * 2 * B * S * C * F)
    dec = cfg["decoder_layers"] * (
        4 * 2 * B * T * C * C + 2 * 2 * B * T * T * C          # self-attention
        + cross * (2 * 2 * B * T * C * C + 2 * 2 * B * S * C * C  # cross-attention q, out / k, v
                   + 2 * 2 * B * T * S * C)                   # cross-attention scores, context
        + 2 * 2 * B * T * C * F)                              # FFN
    out = 2 * B * T * C * V
    return 3 * (enc + dec + out)


def sync(device):
    if device == "cuda":
        torch.cuda.synchronize()


def gemm_gflops(dtype, device, repeats=10):
    """torch.mm n^3 rate in `dtype` (n 2048 on the CPU at the current thread count, 8192 on CUDA),
    median of `repeats`."""
    n = 8192 if device == "cuda" else 2048
    a, b = (torch.randn(n, n, dtype=dtype, device=device) for _ in range(2))

    def mm():
        torch.mm(a, b)
        sync(device)
    return 2 * n ** 3 / median_ms(mm, repeats) / 1e6


def peer_run(weights, name, sentences, length, warmup, steps, threads, compile_timeout, device):
    """One PyTorch configuration in this process, as a user would write it: the reference
    Transformer (weights.pt) or, for a folder of `export --format hf`, the nanoGPT-style GPT."""
    mode, precision = name.split("-")
    torch.set_num_threads(threads)
    g = torch.Generator().manual_seed(2)
    if os.path.isdir(weights):  # decoder-only: nanoGPT's model and training step
        model = nanogpt_peer.GPT.from_hf_export(weights)
        vocab = model.config["vocab_size"]
        opt = model.configure_optimizers(weight_decay=0.1, learning_rate=5e-4, betas=(0.9, 0.95))
        tokens = torch.randint(4, vocab, (sentences, length + 1), generator=g).to(device)
        inputs, targets = tokens[:, :-1], tokens[:, 1:]
    else:
        state, config = ref.load_weights(weights)
        model = ref.ReferenceTransformer(config)
        model.load_state_dict(state)  # weights.pt holds every name, aliases of shared tables too
        vocab = config["model"]["tgt_vocab_size"]
        opt = torch.optim.Adam(model.parameters(), lr=5e-4, betas=(0.9, 0.98), eps=1e-8)
        src = torch.randint(4, vocab, (sentences, length), generator=g)
        target = torch.randint(4, vocab, (sentences, length), generator=g)
        prev = torch.cat([torch.full((sentences, 1), 2), target[:, :-1]], 1)
        src, target, prev = src.to(device), target.to(device), prev.to(device)
    model.to(device).train()
    forward = torch.compile(model) if mode == "compile" else model

    def loss_of():
        if os.path.isdir(weights):
            logits = forward(inputs)
            return F.cross_entropy(logits.float().view(-1, logits.size(-1)), targets.reshape(-1))
        loss, _, ntok = ref.label_smoothed_loss(forward(src, prev), target, 0.1, "uniform", 1)
        return loss / ntok

    def step():
        opt.zero_grad()
        with torch.autocast(device, dtype=torch.bfloat16, enabled=precision == "bf16"):
            loss = loss_of()
        loss.backward()
        opt.step()

    def timed(n):
        times = []
        for _ in range(n):
            t0 = time.perf_counter()
            step()
            sync(device)
            times.append(time.perf_counter() - t0)
        return times

    too_slow = TimeoutError(f"warm-up (compilation) took over {compile_timeout} s")
    if mode == "compile":
        def alarm(*_):
            raise too_slow
        signal.signal(signal.SIGALRM, alarm)
        signal.alarm(compile_timeout)
        warmup = max(warmup, 1)
    warm = timed(warmup)
    signal.alarm(0)
    if mode == "compile" and sum(warm) > compile_timeout:  # the alarm's exception can be swallowed
        raise too_slow
    times = timed(steps)
    return {"impl": "pytorch", "config": name, "threads": torch.get_num_threads(),
            "warmup_seconds": warm, "step_seconds": times, "median_seconds": statistics.median(times)}


def run_config(name, args, weights, threads):
    """One run of configuration `name` in a fresh process: its JSON line, or {"error": reason}."""
    mode, precision = name.split("-")
    common = ["--threads", str(threads), "--sentences", str(args.sentences), "--length", str(args.length),
              "--warmup", str(args.warmup), "--steps", str(args.steps)]
    if mode == "normlab":
        cmd = [args.bench, "--preset", args.preset, "--scheme", args.scheme, "--vocab-size",
               str(args.vocab_size), "--device", args.device, "--precision", precision,
               "--model-kind", args.model_kind, "--form", args.form, "--dropout", str(args.dropout), *common]
    else:
        cmd = [sys.executable, os.path.abspath(__file__), "--peer", weights, "--configs", name, "--device", args.device,
               "--compile-timeout", str(args.compile_timeout), *common]
    return run_json(cmd, "median_seconds")


def run_json(cmd, key):
    """Run cmd in a fresh process: its last stdout line as JSON (which must hold `key`), or
    {"error": reason}: the one it printed (peer_main), else its last stderr line."""
    proc = subprocess.run(cmd, capture_output=True, text=True)
    try:
        result = json.loads(proc.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        result = {}
    if (proc.returncode or key not in result) and "error" not in result:
        tail = proc.stderr.strip().splitlines()
        result = {"error": tail[-1] if tail else f"exit status {proc.returncode}"}
    return result


def peer_main(run):
    """A peer process's end of run_json: run()'s result as one JSON line, or its error (exit 1)."""
    try:
        result = run()
    except Exception as e:  # the parent reports the configuration as failed, with this reason
        traceback.print_exc()
        print(json.dumps({"error": f"{type(e).__name__}: {e}".splitlines()[0][:300]}))
        sys.exit(1)
    print(json.dumps(result))


def round_robin(names, repeats, run, label, show):
    """run(name) for every configuration, round-robin, `repeats` times: ({name: [results]},
    {name: error}). A configuration that fails is not run again; a normlab one stops the bench."""
    runs, errors = {n: [] for n in names}, {}
    for r in range(repeats):
        for name in (n for n in names if n not in errors):
            result = run(name)
            if "error" in result:
                if name.startswith("normlab"):
                    sys.exit(f"{label[name]} failed: {result['error']}")
                errors[name] = result["error"]
                print(f"repeat {r + 1}/{repeats}: {label[name]} failed: {errors[name]}", file=sys.stderr)
            else:
                runs[name].append(result)
                print(f"repeat {r + 1}/{repeats}: {label[name]} {show(result)}", file=sys.stderr)
    return runs, errors


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--normlab", default=os.path.join(HERE, "..", "build", "normlab"), help="build/normlab")
    ap.add_argument("--bench", default=os.path.join(HERE, "..", "build", "normlab_bench"),
                    help="build/normlab_bench")
    ap.add_argument("--configs", default=",".join(CONFIGS),
                    help="comma list of " + ", ".join(CONFIGS) + " (default: all)")
    ap.add_argument("--preset", default="iwslt-small")
    ap.add_argument("--scheme", default="post-ln")
    ap.add_argument("--model-kind", choices=["encoder-decoder", "decoder-only"], default="encoder-decoder",
                    help="decoder-only: against the nanoGPT-style peer (use --scheme pre-ln --form gpt2)")
    ap.add_argument("--form", default="fairseq", help="normlab's --form (decoder-only: gpt2)")
    ap.add_argument("--dropout", type=float, default=None,
                    help="the model's dropout (default: 0.3; decoder-only 0, nanoGPT's)")
    ap.add_argument("--vocab-size", type=int, default=10000)
    ap.add_argument("--sentences", type=int, default=128)
    ap.add_argument("--length", type=int, default=32)
    ap.add_argument("--warmup", type=int, default=2, help="untimed steps (torch.compile: at least 1)")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=0, help="0: what normlab picks")
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--compile-timeout", type=int, default=300,
                    help="seconds allowed for a torch.compile configuration's warm-up")
    ap.add_argument("--out", default=os.path.join(HERE, "..", "docs", "performance.md"))
    ap.add_argument("--json-out", metavar="FILE", help="also write the raw results as JSON")
    ap.add_argument("--peer", metavar="WEIGHTS_PT", help=argparse.SUPPRESS)  # internal: one peer run
    args = ap.parse_args()
    lm = args.model_kind == "decoder-only"
    if args.dropout is None:
        args.dropout = 0.0 if lm else 0.3
    names = args.configs.split(",")
    unknown = [n for n in names if n not in CONFIGS]
    if unknown:
        ap.error(f"unknown configuration(s) {', '.join(unknown)}; choose from {', '.join(CONFIGS)}")
    if args.peer:
        return peer_main(lambda: peer_run(args.peer, names[0], args.sentences, args.length, args.warmup, args.steps,
                                          args.threads, args.compile_timeout, args.device))

    with tempfile.TemporaryDirectory() as tmp:
        ckpt, weights = os.path.join(tmp, "m.ckpt"), os.path.join(tmp, "weights.pt")
        init = ["--init", "xavier" if args.scheme != "rezero" else "rezero"] if not lm else []
        subprocess.run([args.normlab, "init", "--preset", args.preset, "--scheme", args.scheme, *init,
                        "--model-kind", args.model_kind, "--form", args.form, "--dropout", str(args.dropout),
                        "--vocab-size", str(args.vocab_size), "--out", ckpt], check=True,
                       capture_output=True)
        subprocess.run([args.normlab, "export", "--checkpoint", ckpt, "--out", weights], check=True,
                       capture_output=True)
        if lm:  # the peer reads the transformers folder, as nanoGPT's from_pretrained does
            subprocess.run([args.normlab, "export", "--checkpoint", ckpt, "--format", "hf", "--out", weights + ".hf"],
                           check=True, capture_output=True)
            weights += ".hf"
        info = json.loads(subprocess.run([args.normlab, "info", "--json", "--device", args.device],
                                         check=True, capture_output=True, text=True).stdout)
        threads = args.threads or info["intra_op_threads"]
        cfg = json.load(open(os.path.join(tmp, "weights.json")))["model"]
        runs, errors = round_robin(names, args.repeats, lambda n: run_config(n, args, weights, threads), CONFIGS,
                                   lambda r: f"{r['median_seconds']:.3f} s/step")
    torch.set_num_threads(threads)
    # The bf16 peak only when a bf16 configuration runs: where bf16 is emulated (CPUs without
    # AMX or AVX512_BF16) its 2048^3 product takes minutes and no row needs it.
    peaks = {"fp32": gemm_gflops(torch.float32, args.device),
             "bf16": gemm_gflops(torch.bfloat16, args.device) if any(n.endswith("-bf16") for n in names) else None}
    bf16_share = (lambda g: f"{100 * g / peaks['bf16']:.0f}%") if peaks["bf16"] else (lambda g: "-")

    tokens = args.sentences * args.length
    flops = step_flops(cfg, args.sentences, args.length, args.length)
    median = {n: statistics.median(r["median_seconds"] for r in runs[n]) for n in names if n not in errors}
    cpu = cpu_name()
    if args.device == "cuda":
        cpu = f"{torch.cuda.get_device_name(0)} (host {cpu})"
    label = (lambda n: CONFIGS[n].replace("PyTorch", "nanoGPT-style").replace("torch.compile", "nanoGPT-style + torch.compile")
             if lm else CONFIGS[n])
    rows = []
    for n in names:
        raw = ", ".join(f"{r['median_seconds']:.3f}" for r in runs[n])
        if n in errors:
            rows.append(f"| {label(n)} | failed: {errors[n].replace('|', '/')} | | | | | | {raw} |")
            continue
        t = median[n]
        gflops, gemm_s = flops / t / 1e9, flops / (peaks[n.split("-")[1]] * 1e9)
        rows.append(f"| {label(n)} | {t:.3f} | {tokens / t:,.0f} | {gflops:.0f} | "
                    f"{100 * gflops / peaks['fp32']:.0f}% | {bf16_share(gflops)} | "
                    f"{gemm_s:.3f} s ({100 * gemm_s / t:.0f}%) | {raw} |")
    ratios = []
    peers = [n for n in median if not n.startswith("normlab")]
    fastest = min(peers, key=median.get) if peers else None
    for ours, peer in dict.fromkeys([("normlab-bf16", fastest), ("normlab-bf16", "eager-fp32"),
                                     ("normlab-fp32", fastest), ("normlab-fp32", "eager-fp32")]):
        if ours in median and peer in median:
            ratios.append(f"{label(ours)} / {label(peer)} **{median[peer] / median[ours]:.2f}x**")
    compiled = [f"{label(n)} {statistics.median(r['warmup_seconds'][0] for r in runs[n]):.1f} s"
                for n in median if n.startswith("compile")]
    what = (f"Decoder-only training step, `{args.preset}`'s decoder ({cfg['decoder_layers']} layers) {args.scheme} "
            f"--form {args.form}, {args.sentences} blocks x {args.length} tokens of random ids (V={args.vocab_size}), "
            f"dropout {args.dropout:g}, cross-entropy, AdamW (0.9, 0.95, wd 0.1)" if lm else
            f"Training step, `{args.preset}` {args.scheme}, {args.sentences} x {args.length} source and "
            f"target tokens of random ids (V={args.vocab_size}), dropout {args.dropout:g}, label smoothing 0.1, Adam")
    text = (
        f"{what}; "
        f"{threads} threads, {cpu}, {torch.__version__}, {datetime.date.today()}; each run a fresh "
        f"process, configurations round-robin, median of {args.repeats} runs x {args.steps} steps.\n\n"
        f"Command: `python3 bench/train_step.py {shlex.join(sys.argv[1:])}`\n\n"
        "| configuration | s/step | tokens/s (target) | GFLOP/s | % of fp32 GEMM peak | % of bf16 GEMM peak "
        "| matrix products at peak rate (share of step) | runs (s/step) |\n"
        "|---|---:|---:|---:|---:|---:|---:|---|\n" + "\n".join(rows) + "\n\n"
        + (f"Ratios (tokens/s): {'; '.join(ratios)}. The fastest PyTorch configuration: "
           f"{label(fastest)}.\n\n" if ratios else "")
        + (f"GEMM peaks (torch.mm 8192^3 on the GPU): " if args.device == "cuda" else
           f"GEMM peaks (torch.mm 2048^3, {threads} threads): ") + f"fp32 {peaks['fp32']:.0f} GFLOP/s, "
        + (f"bf16 {peaks['bf16']:.0f} GFLOP/s" if peaks["bf16"] else "bf16 not measured (no bf16 configuration)")
        + f". FLOPs counted analytically (matrix products only, "
        f"backward = 2x forward): {flops / 1e9:.1f} GFLOP per step. \"Matrix products at peak rate\" "
        "is the step's FLOPs at the GEMM peak of the configuration's precision (bf16 for autocast "
        "and normlab bf16), and its share of the step time: a lower bound of the time the step spends "
        "in matrix products."
        + (f" torch.compile's first warm-up step (compilation, or loading it from inductor's on-disk cache of "
           f"earlier runs): {', '.join(compiled)}." if compiled else "") + "\n")
    print(text)
    write_block(args.out, "lm_train_step" if lm else "train_step", text,
                heading="Decoder-only training step against a nanoGPT-style script (issue 35)" if lm else None)
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump({"date": str(datetime.date.today()), "cpu": cpu, "torch": torch.__version__,
                       "threads": threads, "args": vars(args), "step_flops": flops, "tokens": tokens,
                       "gemm_peak_gflops": peaks,
                       "configs": {n: {"label": CONFIGS[n], "median_seconds": median.get(n),
                                       "error": errors.get(n), "runs": runs[n]} for n in names}}, f, indent=1)


if __name__ == "__main__":
    main()
