#!/usr/bin/env python3
"""One optimiser step of normlab against the implementations a PyTorch user would pick (issue 36 §4).

For each --optimizers entry, over the parameters of one model (normlab_optimizer_bench builds it and
writes their names and shapes; the peers build tensors of the same shapes with random gradients),
the time of one step, each configuration a fresh process, round-robin over --repeats rounds,
medians reported:

  adam, adamw, sgd    torch.optim's class with its CPU default (the single-tensor loop), with
                      foreach=True and with fused=True; sgd with momentum 0.9
  lion                lion_pytorch.Lion (PyPI lion-pytorch, the package users install)
  muon                torch.optim.Muon on the matrices normlab's muon gives Muon (written by
                      normlab_optimizer_bench), torch.optim.AdamW (default and fused) on the rest,
                      as torch's documentation pairs them
  adamw-schedulefree  schedulefree.AdamWScheduleFree (PyPI schedulefree) and its ForEach variant
                      where the package has one

normlab: normlab_optimizer_bench --optimizer NAME (its fused passes, docs/optimisers.md). Weight
decay 0.01 for adamw, lion, muon and adamw-schedulefree on both sides, 0 for adam and sgd; the
rate a constant 1e-4 (the values do not change the work). Writes the table between markers in
--out (docs/performance.md) and the raw results to --json-out.
"""
import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from doc_block import cpu_name, write_block  # noqa: E402

WD = {"adam": 0.0, "sgd": 0.0, "adamw": 0.01, "lion": 0.01, "muon": 0.01, "adamw-schedulefree": 0.01}


def peer_factories(name, muon_flags):
    """(label, factory(params) -> optimiser) of each peer configuration of optimiser `name`."""
    wd = WD[name]
    if name in ("adam", "adamw", "sgd"):
        cls = {"adam": torch.optim.Adam, "adamw": torch.optim.AdamW, "sgd": torch.optim.SGD}[name]
        kw = dict(lr=1e-4, weight_decay=wd, **({"momentum": 0.9} if name == "sgd" else {}))
        return [(f"torch.optim.{cls.__name__} (default)", lambda p: cls(p, **kw)),
                (f"torch.optim.{cls.__name__} foreach", lambda p: cls(p, foreach=True, **kw)),
                (f"torch.optim.{cls.__name__} fused", lambda p: cls(p, fused=True, **kw))]
    if name == "lion":
        from lion_pytorch import Lion
        return [("lion_pytorch.Lion", lambda p: Lion(p, lr=1e-4, betas=(0.9, 0.99), weight_decay=wd))]
    if name == "muon":
        def pair(fused):
            def make(params):
                muon = [p for p, m in zip(params, muon_flags) if m]
                rest = [p for p, m in zip(params, muon_flags) if not m]
                return Both(torch.optim.Muon(muon, lr=1e-4, weight_decay=wd, adjust_lr_fn="match_rms_adamw"),
                            torch.optim.AdamW(rest, lr=1e-4, betas=(0.9, 0.95), weight_decay=wd,
                                              **({"fused": True} if fused else {})))
            return make
        return [("torch.optim.Muon + AdamW (default)", pair(False)), ("torch.optim.Muon + AdamW fused", pair(True))]
    if name == "adamw-schedulefree":
        import schedulefree
        out = [("schedulefree.AdamWScheduleFree", lambda p: train_mode(schedulefree.AdamWScheduleFree(
            p, lr=1e-4, weight_decay=wd)))]
        if hasattr(schedulefree, "AdamWScheduleFreeReference"):
            out.append(("schedulefree.AdamWScheduleFreeReference", lambda p: train_mode(
                schedulefree.AdamWScheduleFreeReference(p, lr=1e-4, weight_decay=wd))))
        return out
    raise SystemExit(f"optimizer_step.py: no peer for {name}")


class Both:
    def __init__(self, a, b):
        self.parts = (a, b)

    def step(self):
        for p in self.parts:
            p.step()


def train_mode(opt):
    opt.train()  # schedule-free optimisers step only in training mode
    return opt


def run_peer(args):
    """One peer configuration in this process: prints {"median_seconds", "step_seconds"}."""
    torch.set_num_threads(args.threads)
    shapes = json.load(open(args.shapes))
    torch.manual_seed(2)
    params = []
    for s in shapes:
        p = torch.randn(s["shape"]).requires_grad_(True)
        p.grad = torch.randn(s["shape"]) * 1e-2
        params.append(p)
    label, make = peer_factories(args.optimizer, [s["muon"] for s in shapes])[args.peer_index]
    opt = make(params)
    seconds = []
    for i in range(args.warmup + args.steps):
        t0 = time.perf_counter()
        opt.step()
        if i >= args.warmup:
            seconds.append(time.perf_counter() - t0)
    print(json.dumps({"impl": label, "median_seconds": statistics.median(seconds), "step_seconds": seconds}))


def normlab_cmd(args, name, shapes_out=None):
    cmd = [args.bench, "--preset", args.preset, "--model-kind", args.model_kind, "--vocab-size", str(args.vocab_size),
           "--optimizer", name, "--weight-decay", str(WD[name]), "--warmup", str(args.warmup), "--steps",
           str(args.steps), "--threads", str(args.threads)]
    return cmd + (["--shapes-out", shapes_out] if shapes_out else [])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bench", default=os.path.join(HERE, "..", "build", "normlab_optimizer_bench"))
    ap.add_argument("--optimizers", default="adam,adamw,sgd,lion,muon,adamw-schedulefree")
    ap.add_argument("--preset", default="iwslt-small")
    ap.add_argument("--model-kind", default="encoder-decoder")
    ap.add_argument("--vocab-size", type=int, default=10000)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", default=os.path.join(HERE, "..", "docs", "performance.md"))
    ap.add_argument("--json-out", metavar="FILE")
    ap.add_argument("--shapes", help=argparse.SUPPRESS)      # internal: one peer run
    ap.add_argument("--optimizer", help=argparse.SUPPRESS)
    ap.add_argument("--peer-index", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.shapes:
        return run_peer(args)

    work = tempfile.mkdtemp(prefix="optimizer_bench_")
    shapes = os.path.join(work, "shapes.json")
    first = args.optimizers.split(",")[0]
    info = json.loads(subprocess.run(normlab_cmd(args, first, shapes), check=True, capture_output=True,
                                     text=True).stdout)
    results = {}
    for name in args.optimizers.split(","):
        labels = [label for label, _ in peer_factories(name, [s["muon"] for s in json.load(open(shapes))])]
        runs = {label: [] for label in ["normlab"] + labels}
        for _ in range(args.repeats):
            r = json.loads(subprocess.run(normlab_cmd(args, name), check=True, capture_output=True, text=True).stdout)
            runs["normlab"].append(r["median_seconds"])
            for i, label in enumerate(labels):
                out = subprocess.run([sys.executable, __file__, "--shapes", shapes, "--optimizer", name, "--peer-index",
                                      str(i), "--threads", str(args.threads), "--warmup", str(args.warmup), "--steps",
                                      str(args.steps)], check=True, capture_output=True, text=True).stdout
                runs[label].append(json.loads(out.splitlines()[-1])["median_seconds"])  # a package may print first
        results[name] = {label: {"median_seconds": statistics.median(v), "runs": v} for label, v in runs.items()}
        print(name, {k: round(1e3 * v["median_seconds"], 2) for k, v in results[name].items()}, flush=True)

    cpu = cpu_name()
    cmd = "python3 bench/optimizer_step.py " + " ".join(
        f"--{k.replace('_', '-')} {v}" for k, v in (("optimizers", args.optimizers), ("preset", args.preset),
                                                    ("model_kind", args.model_kind), ("vocab_size", args.vocab_size),
                                                    ("repeats", args.repeats), ("threads", args.threads)))
    lines = [f"One optimiser step over the parameters of `{args.preset}` ({args.model_kind}, V={args.vocab_size}: "
             f"{info['parameters']:,} elements in {info['tensors']} tensors), fixed random gradients; "
             f"{args.threads} threads, {cpu}, torch {torch.__version__}, {datetime.date.today()}; each configuration a "
             f"fresh process, round-robin, median over {args.repeats} runs of the median of {args.steps} steps.", "",
             f"Command: `{cmd}`", "",
             "| optimiser | configuration | ms/step | runs (ms) | normlab's speed-up |", "|---|---|---:|---|---:|"]
    for name, r in results.items():
        ours = r["normlab"]["median_seconds"]
        for label, v in r.items():
            ratio = "" if label == "normlab" else f"{v['median_seconds'] / ours:.2f}x"
            lines.append(f"| {name} | {label} | {1e3 * v['median_seconds']:.2f} | "
                         f"{', '.join(f'{1e3 * x:.2f}' for x in v['runs'])} | {ratio} |")
    text = "\n".join(lines) + "\n"
    write_block(args.out, "optimizer_step", text, heading="Optimiser steps against PyTorch's (issue 36 §4)")
    if args.json_out:
        with open(args.json_out + ".tmp", "w") as f:
            json.dump({"info": info, "results": results, "command": cmd}, f, indent=1)
        os.replace(args.json_out + ".tmp", args.json_out)
    print(text)


if __name__ == "__main__":
    sys.exit(main())
