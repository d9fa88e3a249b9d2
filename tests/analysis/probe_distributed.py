#!/usr/bin/env python3
"""normlab probe under a launcher (issue 16 §3): two ranks (Gloo on 127.0.0.1, as torchrun would
start them) split the seeds, rank 0 writes OUT, and every result file equals the one-process
run's byte for byte (probe.json: all but the wall times). Three modes: the gradient probe on
Multi30k val batches with a vocabulary trained by rank 0, --sweep, and --critical-lr."""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import cli_setup  # noqa: E402


def without_wall(j):
    if isinstance(j, dict):
        return {k: without_wall(v) for k, v in j.items() if k != "wall_s"}
    if isinstance(j, list):
        return [without_wall(v) for v in j]
    return j


def main():
    args, prefix, w = cli_setup.parse_and_prepare()
    check = cli_setup.Checks()
    tiny = ["--d-model", "16", "--ffn-dim", "32", "--heads", "2", "--encoder-layers", "2", "--decoder-layers", "2"]
    modes = {
        "probe": (["--schemes", "post-ln,pre-ln", "--train", prefix, "--vocab-size", "200", "--max-tokens", "600",
                   "--seeds", "3", "--batches", "2"], ["grad_norms.csv", "hidden_norms.csv", "ln_jacobian.csv"]),
        "sweep": (["--sweep", "--schemes", "post-ln", "--vocab-size", "50", "--seeds", "3", "--batches", "1",
                   "--sweep-layers", "1,2", "--sweep-d", "8,16"], ["sweep.csv", "sweep.json"]),
        "critical": (["--critical-lr", "--schemes", "post-ln", "--vocab-size", "50", "--seeds", "3", "--batches", "1",
                      "--lanczos-steps", "4", "--critical-lr-tol", "0.2"], ["critical_lr.csv"]),
    }
    for mode, (extra, files) in modes.items():
        cmd = [args.normlab, "--threads", "1", "probe", *tiny, *extra]
        one, two = w(mode + "-one"), w(mode + "-two")
        r = subprocess.run([*cmd, "--out", one], capture_output=True, text=True, timeout=300)
        check(r.returncode == 0, f"{mode}, one process: {r.stderr[-400:]}")
        port = cli_setup.free_port()
        procs = [subprocess.Popen([*cmd, "--out", two, "--dist-timeout", "60"],
                                  env=dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                                           WORLD_SIZE="2", RANK=str(rank)),
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) for rank in range(2)]
        errs = [p.communicate(timeout=300)[1] for p in procs]
        check(all(p.returncode == 0 for p in procs), f"{mode}, two ranks: {[e[-400:] for e in errs]}")
        if r.returncode != 0 or any(p.returncode for p in procs):
            continue
        for f in files:
            a, b = (open(os.path.join(d, f), "rb").read() for d in (one, two))
            check(a == b and len(a) > 0, f"{mode}: {f} differs between one process and two ranks")
        a, b = (without_wall(json.load(open(os.path.join(d, "probe.json")))) for d in (one, two))
        check(a == b, f"{mode}: probe.json differs beyond wall times")
        seeds = [l for l in errs[1].splitlines() if "seed" in l]
        check(mode == "sweep" or len(seeds) > 0, f"{mode}: rank 1 did no seed: {errs[1][-300:]}")
    return check.finish()


if __name__ == "__main__":
    sys.exit(main())
