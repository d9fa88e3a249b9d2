#!/usr/bin/env python3
"""What the first 2% of a run without warm-up predicts (issue 37 §1), on recipes/warmup_auto.toml's run.

    python3 scripts/warmup_predictor.py RUN_DIR [--fit-schemes post-ln,pre-ln,admin,t-fixup] [--with KEPT.csv ...]

The truth of each configuration (scheme, lr) comes from its training cells, with
scripts/warmup_auto.py's margin: it needs warm-up when w0 ends worse than the best of w1..w25 of
the same seed in at least two thirds of the seeds (2 of 3). The evidence comes from its `probe` cells (the first K
updates of w0, the same initialisation and data order), per seed, then the median over seeds
(`--with`: the fixed arms' losses also from scripts/warmup_auto.py's kept csv, a cell of RUN_DIR
taking precedence):

  loss_drop       training loss of update 1 minus that of update K (per token)
  grad_ratio      gradient norm of update K over that of update 1
  ratio0, ratioK  lambda_1(P^-1 H) x lr / 38 at updates 0 and K (Cohen et al.'s threshold, the
                  curvature series' `next` P): above 1, the next step is unstable on a quadratic
  attention_growth  the largest attention logit (every head) at update K over that at update 1
                  (Wortsman et al. 2023's attention-logit growth)
  log_z           the output's largest log Z at update K (Wortsman et al.)
  update_ratio    the largest ||p_K - p_{K-1}|| / ||p_{K-1}|| over the traced weight matrices
                  (Kosson et al. 2024's relative update size)
  output_change   the largest relative change of a block's output in update K (Liu et al. 2020)

For each quantity the threshold (and side) with the most right answers on the fit schemes is
chosen, then applied unchanged to the held-out schemes. Writes RUN_DIR/warmup_predictor.csv
(every probe's quantities and its configuration's truth) and RUN_DIR/warmup_predictor.md."""
import argparse
import csv
import io
import json
import math
import os
import statistics
import sys

# The margin, the cells' names and their final losses: warmup_auto.py's (one definition of each).
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from atomic_write import write_text  # noqa: E402
from warmup_auto import (CELL, FIXED, needs_warmup, read_cell, read_kept, replicate_line, truth_replicate,  # noqa: E402
                         w0_worse)

FEATURES = ["loss_drop", "grad_ratio", "ratio0", "ratioK", "attention_growth", "log_z", "update_ratio",
            "output_change"]


def rows_of(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def probe_features(path):
    ups = [json.loads(l) for l in open(os.path.join(path, "metrics.jsonl"))]
    ups = [r for r in ups if "grad_norm" in r]
    if not ups:
        sys.exit(f"warmup_predictor.py: {path}/metrics.jsonl has no update record")
    k = ups[-1]["step"]
    curv = [json.loads(l) for l in open(os.path.join(path, "curvature.jsonl"))]
    first_ratio = next((c["ratio"] for c in curv if c["step"] == 0), None)
    last_ratio = next((c["ratio"] for c in curv if c["step"] == k), None)
    attention = {}
    for r in rows_of(os.path.join(path, "trace", "attention_logits.csv")):
        s = int(r["step"])
        attention[s] = max(attention.get(s, 0.0), float(r["max_logit"]))
    log_z = {int(r["step"]): float(r["max_log_z"]) for r in rows_of(os.path.join(path, "trace", "output_logits.csv"))}
    update = [float(r["relative_change"]) for r in rows_of(os.path.join(path, "trace", "rotation.csv"))
              if int(r["step"]) == k]
    change = [float(r["relative_change"]) for r in rows_of(os.path.join(path, "trace", "output_change.csv"))
              if int(r["step"]) == k and r["relative_change"]]
    nan = float("nan")
    return {"loss_drop": ups[0]["loss"] - ups[-1]["loss"],
            "grad_ratio": ups[-1]["grad_norm"] / ups[0]["grad_norm"],
            "ratio0": first_ratio if first_ratio is not None else nan,
            "ratioK": last_ratio if last_ratio is not None else nan,
            "attention_growth": attention[k] / attention[1] if attention.get(1) else nan,
            "log_z": log_z.get(k, nan),
            "update_ratio": max(update) if update else nan,
            "output_change": max(change) if change else nan}


def confusion(configs, values, truth, threshold, above):
    tp = fp = fn = tn = 0
    for c in configs:
        predicted = values[c] > threshold if above else values[c] < threshold
        tp += predicted and truth[c]
        fp += predicted and not truth[c]
        fn += (not predicted) and truth[c]
        tn += (not predicted) and not truth[c]
    return tp, fp, fn, tn


def fit(configs, values, truth):
    """The threshold between two sorted values, and the side, with the most right answers."""
    vs = sorted({values[c] for c in configs if math.isfinite(values[c])})
    best = None
    for lo, hi in zip(vs, vs[1:]):
        for above in (True, False):
            tp, fp, fn, tn = confusion(configs, values, truth, (lo + hi) / 2, above)
            if best is None or tp + tn > best[0]:
                best = (tp + tn, (lo + hi) / 2, above)
    return best


def rate(num, den):
    return f"{num}/{den}" + (f" = {num / den:.2f}" if den else "")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("run")
    p.add_argument("--fit-schemes", default="post-ln,pre-ln,admin,t-fixup")
    p.add_argument("--with", dest="kept", action="append", default=[], metavar="KEPT.csv")
    a = p.parse_args()
    cells = os.path.join(a.run, "cells")
    if not os.path.isdir(cells):
        sys.exit(f"warmup_predictor.py: {cells}: no such folder (run recipes/warmup_auto.toml into {a.run} first)")
    losses, probes = {}, {}
    for name in sorted(os.listdir(cells)):
        m = CELL.match(name)
        if not m:
            continue
        key = (m["scheme"], float(m["lr"]), int(m["seed"]))
        if m["arm"] in FIXED:
            losses[(m["arm"],) + key] = read_cell(os.path.join(cells, name))[0]
        elif m["arm"] == "probe":
            probes[key] = probe_features(os.path.join(cells, name))
    if not probes:
        sys.exit(f"warmup_predictor.py: no probe cell in {cells}")
    for path in a.kept:
        for r in read_kept(path):
            if r["arm"] in FIXED:
                losses.setdefault((r["arm"], r["scheme"], r["lr"], r["seed"]),
                                  math.inf if r.get("diverged") else r["valid_loss"])

    configs = sorted({k[:2] for k in probes})
    seeds = sorted({k[2] for k in probes})
    truth, worse_seeds = {}, {}
    for s, lr in configs:
        n = sum(w0_worse(lambda *key: losses.get(key), s, lr, k) for k in seeds)
        worse_seeds[(s, lr)] = n
        truth[(s, lr)] = needs_warmup(n, len(seeds))
    median = {f: {c: statistics.median(probes[c + (k,)][f] for k in seeds if c + (k,) in probes) for c in configs}
              for f in FEATURES}

    fit_schemes = set(a.fit_schemes.split(","))
    fitted = [c for c in configs if c[0] in fit_schemes]
    held = [c for c in configs if c[0] not in fit_schemes]
    md = [f"Truth: {sum(truth[c] for c in configs)} of {len(configs)} configurations need warm-up "
          f"({sum(truth[c] for c in fitted)} of {len(fitted)} fitted on {', '.join(sorted(fit_schemes))}; "
          f"{sum(truth[c] for c in held)} of {len(held)} held out).", "",
          "| quantity | rule fitted | fitted: right | held out: TP, FP, FN, TN | held-out recall | held-out precision |",
          "|---|---|---:|---|---|---|"]
    for f in FEATURES:
        best = fit(fitted, median[f], truth)
        if best is None:
            continue
        right, threshold, above = best
        tp, fp, fn, tn = confusion(held, median[f], truth, threshold, above)
        md.append(f"| {f} | {'>' if above else '<'} {threshold:.4g} | {right}/{len(fitted)} | {tp}, {fp}, {fn}, {tn} | "
                  f"{rate(tp, tp + fn)} | {rate(tp, tp + fp)} |")
    replicate = truth_replicate(lambda *key: losses.get(key), configs, seeds)
    if replicate:
        md += ["", replicate_line(replicate)]
    md += ["", "| scheme | lr | needs warm-up (seeds) | " + " | ".join(FEATURES) + " |",
           "|---|---:|---|" + "---:|" * len(FEATURES)]
    for c in configs:
        md.append(f"| {c[0]} | {c[1]:g} | {'yes' if truth[c] else 'no'} ({worse_seeds[c]}/{len(seeds)}) | " +
                  " | ".join(f"{median[f][c]:.3g}" for f in FEATURES) + " |")

    out_csv = os.path.join(a.run, "warmup_predictor.csv")
    text = io.StringIO()
    w = csv.writer(text)
    w.writerow(["scheme", "lr", "seed", "needs_warmup", "seeds_worse_without"] + FEATURES)
    for (s, lr, k), feats in sorted(probes.items()):
        w.writerow([s, lr, k, int(truth[(s, lr)]), worse_seeds[(s, lr)]] + [feats[f] for f in FEATURES])
    write_text(out_csv, text.getvalue())
    write_text(os.path.join(a.run, "warmup_predictor.md"), "\n".join(md) + "\n")
    print("\n".join(md))
    return 0


if __name__ == "__main__":
    sys.exit(main())
