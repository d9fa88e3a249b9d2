#!/usr/bin/env python3
"""Hessian-vector product speed: normlab (C++) against a PyTorch double-backward peer.

One HVP (gradient with create_graph, then the gradient of g.v, as PyHessian does), the same
product with the batch's first-order graph kept from an earlier product (normlab hessian
--keep-graphs; PyHessian's one-batch mode), and one plain gradient on the same random batch; normlab's HVP/gradient ratio comes from one process
(normlab_hvp_bench), the normlab/PyTorch ratio from alternating fresh processes (normlab, peer,
normlab, ...), each side with the same weights (normlab init + export; the peer is
tests/reference's ReferenceTransformer) and thread count. Reports medians and each process's
peak resident memory, and writes a table to docs/performance.md between markers.
"""
import argparse
import datetime
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "reference"))
import reference_model as ref  # noqa: E402

from doc_block import cpu_name, write_block


def peer_run(weights_pt, sentences, length, repeats, threads):
    torch.set_num_threads(threads)
    state, config = ref.load_weights(weights_pt)
    model = ref.ReferenceTransformer(config)
    model.load_state_dict(state)
    model.eval()  # dropout off, as for Hessians
    params = [p for p in model.parameters() if p.requires_grad]
    vocab = config["model"]["tgt_vocab_size"]
    g = torch.Generator().manual_seed(2)
    src = torch.cat([torch.randint(4, vocab, (sentences, length - 1), generator=g),
                     torch.full((sentences, 1), 2)], 1)
    body = torch.randint(4, vocab, (sentences, length - 1), generator=g)
    target = torch.cat([body, torch.full((sentences, 1), 2)], 1)
    prev = torch.cat([torch.full((sentences, 1), 2), body], 1)
    v = [torch.randn_like(p) for p in params]

    def loss():
        total, _, ntok = ref.label_smoothed_loss(model(src, prev), target, 0.1, "uniform", 1)
        return total / ntok

    kept = torch.autograd.grad(loss(), params, create_graph=True)  # PyHessian's one-batch mode
    grad_s, hvp_s, kept_s = [], [], []
    for r in range(repeats + 1):
        t0 = time.perf_counter()
        torch.autograd.grad(loss(), params)
        tg = time.perf_counter() - t0
        t0 = time.perf_counter()
        grads = torch.autograd.grad(loss(), params, create_graph=True)
        torch.autograd.grad(grads, params, grad_outputs=v)
        th = time.perf_counter() - t0
        t0 = time.perf_counter()
        torch.autograd.grad(kept, params, grad_outputs=v, retain_graph=True)
        tk = time.perf_counter() - t0
        if r:
            grad_s.append(tg)
            hvp_s.append(th)
            kept_s.append(tk)
    return {"impl": "pytorch", "parameters": sum(p.numel() for p in params),
            "median_gradient_seconds": statistics.median(grad_s), "median_hvp_seconds": statistics.median(hvp_s),
            "median_kept_hvp_seconds": statistics.median(kept_s),
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--normlab", required=True, help="build/normlab")
    ap.add_argument("--bench", required=True, help="build/normlab_hvp_bench")
    ap.add_argument("--scheme", default="post-ln")
    ap.add_argument("--vocab-size", type=int, default=8000)
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--sentences", type=int, default=32)
    ap.add_argument("--length", type=int, default=16)
    ap.add_argument("--repeats", type=int, default=3, help="timed pairs per process")
    ap.add_argument("--processes", type=int, default=3, help="alternating processes per side")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", default=os.path.join(HERE, "..", "docs", "performance.md"))
    ap.add_argument("--peer", metavar="WEIGHTS_PT", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.peer:
        print(json.dumps(peer_run(a.peer, a.sentences, a.length, a.repeats, a.threads)))
        return
    load_start, t_start = os.getloadavg(), time.perf_counter()
    size = ["--d-model", "512", "--ffn-dim", "1024", "--heads", "4"]
    with tempfile.TemporaryDirectory() as tmp:
        ckpt, weights = os.path.join(tmp, "m.ckpt"), os.path.join(tmp, "weights.pt")
        subprocess.run([a.normlab, "init", "--scheme", a.scheme, *size, "--encoder-layers", str(a.layers),
                        "--decoder-layers", str(a.layers), "--vocab-size", str(a.vocab_size), "--out", ckpt],
                       check=True, capture_output=True)
        subprocess.run([a.normlab, "export", "--checkpoint", ckpt, "--out", weights], check=True, capture_output=True)
        common = ["--sentences", str(a.sentences), "--length", str(a.length), "--repeats", str(a.repeats),
                  "--threads", str(a.threads)]
        ours, peers = [], []
        for r in range(a.processes):
            out = subprocess.run([a.bench, "--scheme", a.scheme, *size, "--layers", str(a.layers),
                                  "--vocab-size", str(a.vocab_size), *common], check=True, capture_output=True, text=True)
            ours.append(json.loads(out.stdout))
            out = subprocess.run([sys.executable, os.path.abspath(__file__), "--peer", weights, "--normlab", a.normlab,
                                  "--bench", a.bench, *common], check=True, capture_output=True, text=True)
            peers.append(json.loads(out.stdout))
            print(f"process {r + 1}: normlab grad {ours[-1]['median_gradient_seconds']:.3f} s, "
                  f"HVP {ours[-1]['median_hvp_seconds']:.3f} s; PyTorch grad {peers[-1]['median_gradient_seconds']:.3f} s, "
                  f"HVP {peers[-1]['median_hvp_seconds']:.3f} s", file=sys.stderr)
    assert ours[0]["parameters"] == peers[0]["parameters"], (ours[0]["parameters"], peers[0]["parameters"])
    med = lambda rows, key: statistics.median(r[key] for r in rows)  # noqa: E731
    g_ours, h_ours = med(ours, "median_gradient_seconds"), med(ours, "median_hvp_seconds")
    g_peer, h_peer = med(peers, "median_gradient_seconds"), med(peers, "median_hvp_seconds")
    k_ours, k_peer = med(ours, "median_kept_hvp_seconds"), med(peers, "median_kept_hvp_seconds")
    ratios = [r["median_hvp_seconds"] / r["median_gradient_seconds"] for r in ours]
    kept_ratios = [r["median_kept_hvp_seconds"] / r["median_gradient_seconds"] for r in ours]
    cpu = cpu_name()
    load = os.getloadavg()
    command = " ".join(["python3", "bench/hvp_step.py"] + sys.argv[1:])
    text = (
        f"One HVP vs one gradient, {a.scheme} d=512, 4 heads, FFN 1024, {a.layers}+{a.layers} layers, "
        f"V={a.vocab_size} ({ours[0]['parameters']:,} parameters), one batch of {a.sentences} x {a.length} "
        f"random source and target tokens, dropout off, label smoothing 0.1, float32; {a.threads} thread(s), "
        f"{cpu}, torch {torch.__version__}, {datetime.date.today()}; 1-minute load average "
        f"{load_start[0]:.2f} at the start, {load[0]:.2f} at the end ({os.cpu_count()} cores, shared); medians of {a.processes} alternating processes "
        f"per side x {a.repeats} timed pairs; wall time {time.perf_counter() - t_start:.0f} s.\n\n"
        f"Command: `{command}`\n\n"
        "| implementation | gradient s | HVP s | HVP / gradient | HVP, graph kept s | kept / gradient | peak RSS MB |\n"
        "|---|---:|---:|---:|---:|---:|---:|\n"
        f"| normlab (C++) | {g_ours:.3f} | {h_ours:.3f} | {h_ours / g_ours:.2f} | {k_ours:.3f} | {k_ours / g_ours:.2f} | "
        f"{max(r['peak_rss_mb'] for r in ours):.0f} |\n"
        f"| PyTorch double backward | {g_peer:.3f} | {h_peer:.3f} | {h_peer / g_peer:.2f} | {k_peer:.3f} | "
        f"{k_peer / g_peer:.2f} | {max(r['peak_rss_mb'] for r in peers):.0f} |\n\n"
        f"normlab HVP / gradient within each process: {', '.join(f'{x:.2f}' for x in ratios)}; with the graph "
        f"kept: {', '.join(f'{x:.2f}' for x in kept_ratios)} (aim <= 2.5). PyTorch time / normlab time: "
        f"**{h_peer / h_ours:.2f}x** for the HVP, **{k_peer / k_ours:.2f}x** with the graph kept (aim >= 1). "
        "Peak RSS holds both products' graphs (each process keeps one batch's graph throughout).\n")
    print(text)
    write_block(a.out, "hvp_step", text, heading="Hessian-vector products")


if __name__ == "__main__":
    main()
