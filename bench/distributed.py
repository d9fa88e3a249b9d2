#!/usr/bin/env python3
"""Data-parallel training speed (issue 16 §6): `normlab train` as R ranks x T threads each
against one process with R x T threads, the same batches per update (the one process
accumulates R batches with --update-freq R), on Multi30k with a real model size.

Sides, each a fresh launch, alternating, medians over --repeats:
  1x2          one process, --threads 2, --update-freq 2
  2x1          two ranks (Gloo on 127.0.0.1, the environment torchrun sets), --threads 1 each,
               the gradient all-reduce in 25 MB buckets overlapped with backward (the default)
  2x1-serial   the same with one bucket of all gradients (--bucket-cap-mb 4096), which can
               start only when backward has ended: the all-reduce after backward, not overlapped
Speed is target tokens per second over the updates after --skip (read from metrics.jsonl's
wall_s and tokens; --log-interval 1); the 2-rank sides' `sync_s` (time waiting for the
collectives after backward, the other rank included) gives the communication share. On a
2-core machine the ranks share the cores that the one process uses alone, so this measures the
cost of the collectives, not a speed-up.
"""
import argparse
import datetime
import json
import os
import platform
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def train_argv(a, out, threads, update_freq, bucket_cap_mb=25):
    prefix = os.path.join(a.data, "multi30k", "train")
    return [a.normlab, "--threads", str(threads), "--device", "cpu", "train", "--train", prefix,
            "--valid", os.path.join(a.data, "multi30k", "val"), "--cache-dir", a.cache,
            "--vocab-size", "8000", "--d-model", str(a.d_model), "--ffn-dim", str(4 * a.d_model),
            "--heads", "4", "--encoder-layers", "3", "--decoder-layers", "3", "--share", "all",
            "--scheme", "pre-ln", "--max-tokens", str(a.max_tokens), "--update-freq", str(update_freq),
            "--max-steps", str(a.steps), "--log-interval", "1", "--precision", a.precision,
            "--lr", "5e-4", "--warmup-steps", "4000", "--bucket-cap-mb", str(bucket_cap_mb), "--out", out]


def speed(out, skip):
    """(tokens/s, sync share) over the records after the first `skip` updates."""
    recs = [json.loads(l) for l in open(os.path.join(out, "metrics.jsonl"))]
    steps = [r for r in recs if "loss" in r and "valid_loss" not in r]
    later = [r for r in steps if r["step"] > skip]
    wall = later[-1]["wall_s"] - steps[skip - 1]["wall_s"]
    tokens = sum(r["tokens"] for r in later)
    sync = sum(r.get("sync_s", 0.0) for r in later)
    return tokens / wall, sync / wall


def run_side(a, side, work, i):
    out = os.path.join(work, f"{side}-{i}")
    shutil.copytree(a.seed_run, out)  # the vocabulary, so that only training is timed
    if side == "1x2":
        subprocess.run(train_argv(a, out, 2, 2), check=True, capture_output=True, text=True)
    else:
        port = free_port()
        bucket_cap_mb = 4096 if side == "2x1-serial" else 25
        procs = [subprocess.Popen(train_argv(a, out, 1, 1, bucket_cap_mb), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                  text=True, env=dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                                                      WORLD_SIZE="2", RANK=str(r), LOCAL_RANK=str(r),
                                                      LOCAL_WORLD_SIZE="2")) for r in range(2)]
        errs = [p.communicate()[1] for p in procs]
        if any(p.returncode != 0 for p in procs):
            raise RuntimeError(f"{side} failed: {errs}")
    return speed(out, a.skip)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--normlab", required=True)
    ap.add_argument("--data", default=os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data"))
    ap.add_argument("--steps", type=int, default=25)
    ap.add_argument("--skip", type=int, default=5, help="updates not timed (warm-up of the allocator)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--d-model", type=int, default=256)
    ap.add_argument("--max-tokens", type=int, default=4096)
    ap.add_argument("--precision", default="fp32")
    ap.add_argument("--json", help="write the measurements here")
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="normlab_dist_bench_")
    a.cache = os.path.join(work, "cache")
    a.seed_run = os.path.join(work, "seed")
    # Vocabulary and encoded corpus once, outside the timing.
    seed_argv = train_argv(a, a.seed_run, 2, 1)
    seed_argv[seed_argv.index("--max-steps") + 1] = "1"
    subprocess.run(seed_argv, check=True, capture_output=True)
    shutil.rmtree(os.path.join(a.seed_run, "checkpoints"))
    os.remove(os.path.join(a.seed_run, "metrics.jsonl"))
    load_start = os.getloadavg()[0]
    results = {"1x2": [], "2x1": [], "2x1-serial": []}
    for i in range(a.repeats):
        for side in results:
            results[side].append(run_side(a, side, work, i))
            print(f"{side} run {i + 1}: {results[side][-1][0]:.0f} tokens/s, sync share {results[side][-1][1]:.1%}",
                  file=sys.stderr)
    med = {s: statistics.median(t for t, _ in v) for s, v in results.items()}
    sync = {s: statistics.median(x for _, x in results[s]) for s in ("2x1", "2x1-serial")}
    print(f"# {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
          f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, load {load_start:.2f} -> "
          f"{os.getloadavg()[0]:.2f}; d_model {a.d_model}, max_tokens {a.max_tokens}, {a.precision}, "
          f"updates {a.skip + 1}..{a.steps} of each run, medians of {a.repeats}")
    print("| side | tokens/s | / 1x2 | waiting for collectives after backward |")
    print("|---|---:|---:|---:|")
    print(f"| 1 process x 2 threads, update-freq 2 | {med['1x2']:.0f} | 1.00x | - |")
    print(f"| 2 ranks x 1 thread (Gloo), all-reduce overlapped with backward | {med['2x1']:.0f} | "
          f"{med['2x1'] / med['1x2']:.2f}x | {sync['2x1']:.1%} |")
    print(f"| 2 ranks x 1 thread (Gloo), one bucket after backward | {med['2x1-serial']:.0f} | "
          f"{med['2x1-serial'] / med['1x2']:.2f}x | {sync['2x1-serial']:.1%} |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"runs": results, "median_tokens_per_s": med, "median_sync_share": sync}, f, indent=1)
    shutil.rmtree(work)


if __name__ == "__main__":
    main()
