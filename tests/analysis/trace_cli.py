#!/usr/bin/env python3
"""normlab train --trace-steps on real data (Multi30k val, a tiny model): the update histogram
of step 2 against numpy counting of the difference of the checkpoints saved after updates 1
and 2; every histogram's counts sum to the parameter's element count; one LayerNorm-input row
per LayerNorm and step; a resumed run keeps the earlier rows; no trace folder when off; an
unknown traced parameter and (probe) too few batches in the corpus end with exit code 2. The
angular update of every weight matrix against numpy's from the checkpoints; the blocks' output
change, exactly zero at lr 0."""
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

    # Kosson et al.'s angular update of every weight matrix at step 2, against numpy's from the
    # checkpoints saved after updates 1 and 2.
    rotation = {(r["step"], r["param"]): r for r in csv.DictReader(open(os.path.join(run_dir, "trace", "rotation.csv")))}
    matrices = [n for n, t in after.items() if "/" not in n and t.dim() == 2 and not torch.equal(t, before[n])]
    check(len(matrices) > 10, f"changed weight matrices: {matrices}")
    for name in matrices:
        a, b = before[name].double().numpy().ravel(), after[name].double().numpy().ravel()
        cosine = a @ b / (np.linalg.norm(a) * np.linalg.norm(b))
        angle = np.arctan2(np.sqrt(max(1 - cosine * cosine, 0.0)), cosine)
        change = np.linalg.norm(b - a) / np.linalg.norm(a)
        row = rotation.get(("2", name))
        check(row is not None and abs(float(row["angle"]) - angle) <= 1e-3 * angle + 1e-7
              and abs(float(row["relative_change"]) - change) <= 1e-4 * change,
              f"rotation {name}: {row} vs numpy angle {angle:.6g}, change {change:.6g}")
    # The output change of every block (2 encoder layers x 2 blocks + 1 decoder layer x 3) per step.
    out = list(csv.DictReader(open(os.path.join(run_dir, "trace", "output_change.csv"))))
    # Update 1 runs at the warm-up's initial lr, 0: no change; update 2 changes every block.
    check(len(out) == 14 and all((0 < float(x["relative_change"]) < 1) == (x["step"] == "2") for x in out),
          f"output_change rows: {out}")
    check({x["block"] for x in out} == {"self_attn", "encoder_attn", "ffn"}, "block names")

    # Resuming to step 3 keeps steps 1-2 and adds step 3.
    r = subprocess.run(base + ["--max-steps", "3", "--out", run_dir, "--trace-steps", "3",
                               "--trace-params", params], capture_output=True, text=True, timeout=120)
    check(r.returncode == 0, r.stderr)
    for name in ("histograms.csv", "rotation.csv", "output_change.csv"):
        steps = {row["step"] for row in csv.DictReader(open(os.path.join(run_dir, "trace", name)))}
        check(steps == {"1", "2", "3"}, f"{name}: steps after resume: {steps}")

    # At lr 1e-30 nothing moves in float32 but the zero biases: every angle and weight change is
    # exactly 0, every output change below 1e-20.
    still = os.path.join(args.workdir, "still")
    r = subprocess.run([x if x != "1e-3" else "1e-30" for x in base] + ["--max-steps", "1", "--out", still,
                                                                        "--trace-steps", "1"],
                       capture_output=True, text=True, timeout=120)
    check(r.returncode == 0, r.stderr)
    if r.returncode == 0:
        rot = [float(x[k]) for x in csv.DictReader(open(os.path.join(still, "trace", "rotation.csv")))
               for k in ("angle", "relative_change")]
        outs = [float(x["relative_change"]) for x in csv.DictReader(open(os.path.join(still, "trace", "output_change.csv")))]
        check(rot and all(z == 0 for z in rot), f"lr 1e-30: nonzero rotation {set(rot)}")
        check(outs and all(0 <= z < 1e-20 for z in outs), f"lr 1e-30: output change {set(outs)}")

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
