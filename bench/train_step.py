#!/usr/bin/env python3
"""Training-step speed of normlab against the same model in PyTorch eager (the peer), one run.

Both start from the same weights (normlab init + export; the peer is tests/reference's
ReferenceTransformer), take the same random batch shape, label-smoothed loss, backward and
Adam(0.9, 0.98, 1e-8), with the same intra-op thread count. Each run is a fresh process
(this script re-runs itself with --peer for the PyTorch side), and runs alternate (normlab,
peer, normlab, ...) to spread machine noise; medians are reported. Writes a table to
docs/performance.md between markers, with the machine and date.
"""
import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "reference"))
import reference_model as ref  # noqa: E402

from doc_block import write_block


def step_flops(cfg, B, S, T):
    """Matrix-multiply FLOPs of one training step: forward x 3 (backward is about 2x)."""
    C, F, V = cfg["d_model"], cfg["ffn_dim"], cfg["tgt_vocab_size"]
    enc = cfg["encoder_layers"] * (4 * 2 * B * S * C * C + 2 * 2 * B * S * S * C + 2 * 2 * B * S * C * F)
    dec = cfg["decoder_layers"] * (
        4 * 2 * B * T * C * C + 2 * 2 * B * T * T * C          # self-attention
        + 2 * 2 * B * T * C * C + 2 * 2 * B * S * C * C       # cross-attention q, out / k, v
        + 2 * 2 * B * T * S * C                               # cross-attention scores, context
        + 2 * 2 * B * T * C * F)                              # FFN
    out = 2 * B * T * C * V
    return 3 * (enc + dec + out)


def sgemm_gflops(n=2048, repeats=5):
    a, b = torch.randn(n, n), torch.randn(n, n)
    torch.mm(a, b)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        torch.mm(a, b)
        times.append(time.perf_counter() - t0)
    return 2 * n ** 3 / statistics.median(times) / 1e9


def peer_run(weights_pt, sentences, length, warmup, steps, threads):
    torch.set_num_threads(threads)
    state, config = ref.load_weights(weights_pt)
    model = ref.ReferenceTransformer(config)
    model.load_state_dict(state)  # weights.pt holds every name, aliases of shared tables too
    model.train()
    vocab = config["model"]["tgt_vocab_size"]
    opt = torch.optim.Adam(model.parameters(), lr=5e-4, betas=(0.9, 0.98), eps=1e-8)
    g = torch.Generator().manual_seed(2)
    src = torch.randint(4, vocab, (sentences, length), generator=g)
    target = torch.randint(4, vocab, (sentences, length), generator=g)
    prev = torch.cat([torch.full((sentences, 1), 2), target[:, :-1]], 1)

    def step():
        opt.zero_grad()
        logits = model(src, prev)
        loss, _, ntok = ref.label_smoothed_loss(logits, target, 0.1, "uniform", 1)
        (loss / ntok).backward()
        opt.step()

    for _ in range(warmup):
        step()
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    return {"impl": "pytorch", "median_seconds": statistics.median(times), "step_seconds": times}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--normlab", required=True, help="build/normlab")
    ap.add_argument("--bench", required=True, help="build/normlab_bench")
    ap.add_argument("--preset", default="iwslt-small")
    ap.add_argument("--scheme", default="post-ln")
    ap.add_argument("--vocab-size", type=int, default=10000)
    ap.add_argument("--sentences", type=int, default=128)
    ap.add_argument("--length", type=int, default=32)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=0, help="0: what normlab picks")
    ap.add_argument("--out", default=os.path.join(HERE, "..", "docs", "performance.md"))
    ap.add_argument("--peer", metavar="WEIGHTS_PT", help=argparse.SUPPRESS)  # internal: one peer run
    args = ap.parse_args()
    if args.peer:
        print(json.dumps(peer_run(args.peer, args.sentences, args.length, args.warmup, args.steps,
                                  args.threads)))
        return

    with tempfile.TemporaryDirectory() as tmp:
        ckpt, weights = os.path.join(tmp, "m.ckpt"), os.path.join(tmp, "weights.pt")
        subprocess.run([args.normlab, "init", "--preset", args.preset, "--scheme", args.scheme,
                        "--init", "xavier" if args.scheme != "rezero" else "rezero",
                        "--vocab-size", str(args.vocab_size), "--out", ckpt], check=True,
                       capture_output=True)
        subprocess.run([args.normlab, "export", "--checkpoint", ckpt, "--out", weights], check=True,
                       capture_output=True)
        info = json.loads(subprocess.run([args.normlab, "info", "--json", "--device", "cpu"],
                                         check=True, capture_output=True, text=True).stdout)
        threads = args.threads or info["intra_op_threads"]
        cfg = json.load(open(os.path.join(tmp, "weights.json")))["model"]
        common = ["--sentences", str(args.sentences), "--length", str(args.length),
                  "--warmup", str(args.warmup), "--steps", str(args.steps)]
        ours, peers = [], []
        for r in range(args.repeats):
            out = subprocess.run([args.bench, "--preset", args.preset, "--scheme", args.scheme,
                                  "--vocab-size", str(args.vocab_size), "--threads", str(threads),
                                  "--device", "cpu", *common], check=True, capture_output=True, text=True)
            ours.append(json.loads(out.stdout)["median_seconds"])
            out = subprocess.run([sys.executable, os.path.abspath(__file__), "--peer", weights,
                                  "--threads", str(threads), "--normlab", args.normlab,
                                  "--bench", args.bench, *common], check=True, capture_output=True, text=True)
            peers.append(json.loads(out.stdout)["median_seconds"])
            print(f"repeat {r + 1}: normlab {ours[-1]:.3f} s/step, PyTorch peer {peers[-1]:.3f} s/step",
                  file=sys.stderr)
        torch.set_num_threads(threads)
        py_sgemm = sgemm_gflops()

    tokens = args.sentences * args.length
    flops = step_flops(cfg, args.sentences, args.length, args.length)
    t_ours, t_peer = statistics.median(ours), statistics.median(peers)
    peak = info["sgemm_gflops_2048"]
    g_ours, g_peer = flops / t_ours / 1e9, flops / t_peer / 1e9
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")),
               platform.processor())
    text = (
        f"Training step, `{args.preset}` {args.scheme}, {args.sentences} x {args.length} source and "
        f"target tokens of random ids (V={args.vocab_size}), dropout 0.3, label smoothing 0.1, Adam; "
        f"{threads} threads, {cpu}, {torch.__version__}, {datetime.date.today()}; "
        f"median of {args.repeats} runs x {args.steps} steps.\n\n"
        f"Command: `python3 bench/train_step.py --normlab build/normlab --bench build/normlab_bench`\n\n"
        "| implementation | s/step | tokens/s (target) | GFLOP/s | % of sgemm peak |\n"
        "|---|---:|---:|---:|---:|\n"
        f"| normlab (C++) | {t_ours:.3f} | {tokens / t_ours:,.0f} | {g_ours:.0f} | {100 * g_ours / peak:.0f}% |\n"
        f"| PyTorch eager peer | {t_peer:.3f} | {tokens / t_peer:,.0f} | {g_peer:.0f} | {100 * g_peer / peak:.0f}% |\n\n"
        f"Ratio normlab / peer (tokens/s): **{t_peer / t_ours:.2f}x**. sgemm 2048^3 peak: normlab "
        f"{peak:.0f} GFLOP/s, torch.mm in Python {py_sgemm:.0f} GFLOP/s. FLOPs counted analytically "
        f"(matrix products only, backward = 2x forward): {flops / 1e9:.1f} GFLOP per step.\n")
    print(text)
    write_block(args.out, "train_step", text)


if __name__ == "__main__":
    main()
