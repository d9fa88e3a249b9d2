#!/usr/bin/env python3
"""normlab train --trace-steps on real data (Multi30k val, a tiny model): the update histogram
of step 2 against numpy counting of the difference of the checkpoints saved after updates 1
and 2; every histogram's counts sum to the parameter's element count; one LayerNorm-input row
per LayerNorm and step; a resumed run keeps the earlier rows; no trace folder when off; an
unknown traced parameter and (probe) too few batches in the corpus end with exit code 2."""
import csv
import os
import subprocess
import sys
from collections import defaultdict

import numpy as np
import torch
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import cli_setup  # noqa: E402


def main():
    args, prefix, _ = cli_setup.parse_and_prepare()
    run_dir = os.path.join(args.workdir, "run")
    base = [args.normlab, "train", "--train", prefix, "--valid", prefix, "--vocab-size", "300",
            "--d-model", "16", "--ffn-dim", "32", "--heads", "2", "--encoder-layers", "2",
            "--decoder-layers", "1", "--max-tokens", "300", "--save-interval-updates", "1",
            "--lr", "1e-3", "--threads", "1", "--device", "cpu"]
    params = "encoder.embed_tokens.weight,decoder.layers.0.fc1.weight"
    check = cli_setup.Checks()
    r = subprocess.run(base + ["--max-steps", "2", "--out", run_dir, "--trace-steps", "3",
                               "--trace-params", params], capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        print(r.stderr)
        return 1
    ckpt = lambda u: torch.load(os.path.join(run_dir, "checkpoints", f"checkpoint_1_{u}.pt"))
    before, after = ckpt(1), ckpt(2)
    rows = list(csv.DictReader(open(os.path.join(run_dir, "trace", "histograms.csv"))))
    counts = defaultdict(int)
    for row in rows:
        counts[(int(row["step"]), row["param"], row["kind"])] += int(row["count"])
    for name in params.split(","):
        n = before[name].numel()
        for step in (1, 2):
            for kind in ("grad", "update"):
                check(counts[(step, name, kind)] == n, f"{name} step {step} {kind}: {counts[(step, name, kind)]} != {n}")
        # numpy's own counting of the second update, p_new - p_old, over log10|v| bins.
        d = (after[name] - before[name]).numpy().astype(np.float64).ravel()
        a = np.abs(d)
        expected = defaultdict(int)
        expected[("-inf", "-inf")] = int((a == 0).sum())
        nz = a[a > 0]
        k = np.floor((np.log10(nz) + 16.0) * 10).astype(np.int64)
        expected[("-inf", "-16")] += int((k < 0).sum())
        expected[("4", "inf")] += int((k >= 200).sum())
        for b, c in zip(*np.unique(k[(k >= 0) & (k < 200)], return_counts=True)):
            expected[("%.9g" % (-16 + b / 10), "%.9g" % (-16 + (b + 1) / 10))] += int(c)
        got = {(row["bin_lo"], row["bin_hi"]): int(row["count"]) for row in rows
               if row["step"] == "2" and row["param"] == name and row["kind"] == "update"}
        check(got == {key: v for key, v in expected.items() if v}, f"{name}: update bins differ from numpy's")
    ln = list(csv.DictReader(open(os.path.join(run_dir, "trace", "ln_inputs.csv"))))
    # post-ln: 2 encoder layers x 2 LayerNorms + 1 decoder layer x 3, for steps 1 and 2.
    check(len(ln) == 14 and all(float(x["mean_input_norm"]) > 0 for x in ln), f"ln_inputs rows: {ln}")
    check({x["ln"] for x in ln} == {"self_attn_layer_norm", "encoder_attn_layer_norm", "final_layer_norm"},
          "LayerNorm names")

    # Resuming to step 3 keeps steps 1-2 and adds step 3.
    r = subprocess.run(base + ["--max-steps", "3", "--out", run_dir, "--trace-steps", "3",
                               "--trace-params", params], capture_output=True, text=True, timeout=120)
    check(r.returncode == 0, r.stderr)
    steps = {row["step"] for row in csv.DictReader(open(os.path.join(run_dir, "trace", "histograms.csv")))}
    check(steps == {"1", "2", "3"}, f"steps after resume: {steps}")

    off = os.path.join(args.workdir, "off")
    r = subprocess.run(base + ["--max-steps", "1", "--out", off], capture_output=True, text=True, timeout=120)
    check(r.returncode == 0 and not os.path.exists(os.path.join(off, "trace")), "trace folder without --trace-steps")
    # Errors found after the progress lines began: exit 2, the last line names the problem.
    late = [(base + ["--max-steps", "1", "--out", os.path.join(args.workdir, "bad"), "--trace-steps", "1",
                     "--trace-params", "encoder.nope"], "--trace-params: no parameter 'encoder.nope'"),
            ([args.normlab, "probe", "--d-model", "16", "--ffn-dim", "16", "--heads", "2", "--encoder-layers", "1",
              "--decoder-layers", "1", "--train", prefix, "--vocab", os.path.join(run_dir, "vocab", "spm.model"),
              "--batches", "500", "--out", os.path.join(args.workdir, "probe"), "--threads", "1"], "makes only")]
    for argv, expected in late:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=120)
        last = r.stderr.strip().splitlines()[-1] if r.stderr.strip() else ""
        check(r.returncode == 2 and expected in last and last.startswith("normlab: error:"),
              f"{' '.join(argv[1:3])}: rc={r.returncode} last line {last!r}")
    return check.finish()


if __name__ == "__main__":
    sys.exit(main())
