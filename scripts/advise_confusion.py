#!/usr/bin/env python3
"""`normlab advise` against training runs: the confusion table of recipes/advise_grid.toml.

Reads DIR/summary.csv (written by `normlab run`) and every advise cell's advise.json, decides
the truth of each (scheme, lr) from the training cells and compares the predictions with it:
- truth "needs warm-up": in at least half of the seeds the run without warm-up (`nowarm_*`)
  diverged or ended with a final validation loss more than MARGIN above the run with warm-up
  (`warm_*`) of the same seed;
- the advisor's rule (advise.json `needs_warmup`: target lr > median critical lr), and for
  comparison the curvature rule (median lambda_1(P^-1 H) at initialisation above the
  stability threshold at the target lr).
Writes DIR/advise_confusion.md (the tables, every failure named) and DIR/advise_grid.csv (one
row per scheme and lr: the numbers behind it); prints the markdown. Exit 1 when a cell the
table needs is missing or failed.
"""
import argparse
import csv
import json
import math
import os
import sys
from collections import defaultdict

from atomic_write import write_text

MARGIN = 0.1  # validation loss (nats per token) that counts as clearly worse


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dir", help="the `normlab run recipes/advise_grid.toml` folder")
    args = parser.parse_args()
    rows = list(csv.DictReader(open(os.path.join(args.dir, "summary.csv"))))
    runs = defaultdict(dict)  # (scheme, lr) -> {(kind, seed): final_valid_loss or inf when diverged}
    for r in rows:
        if r["command"] != "train":
            continue
        kind = r["cell"].split("_", 1)[0]
        if r["status"] not in ("ok", "diverged"):
            sys.exit(f"advise_confusion: cell {r['cell']} {r['status']}: rerun `normlab run` first")
        loss = float(r["final_valid_loss"]) if r["status"] == "ok" and r["final_valid_loss"] else math.inf
        runs[(r["scheme"], float(r["lr"]))][(kind, r["seed"])] = loss if math.isfinite(loss) else math.inf

    table, failures = [], []
    counts = {rule: defaultdict(int) for rule in ("critical_lr", "curvature")}
    for r in rows:
        if r["command"] != "advise":
            continue
        key = (r["scheme"], float(r["lr"]))
        path = os.path.join(args.dir, "cells", r["cell"], "advise.json")
        if r["status"] != "ok" or not os.path.exists(path):
            sys.exit(f"advise_confusion: cell {r['cell']} {r['status']}: no advise.json")
        advice = json.load(open(path))
        seeds = sorted({seed for _, seed in runs[key]})
        worse = [s for s in seeds
                 if runs[key].get(("nowarm", s), math.inf) > runs[key].get(("warm", s), math.inf) + MARGIN
                 or math.isinf(runs[key].get(("nowarm", s), math.inf))]
        truth = 2 * len(worse) >= len(seeds) and bool(seeds)
        predictions = {"critical_lr": advice["needs_warmup"], "curvature": advice["median_threshold_ratio"] > 1}
        for rule, p in predictions.items():
            counts[rule][(p, truth)] += 1
        if predictions["critical_lr"] != truth:
            failures.append(f"{key[0]} at lr {key[1]:g}: predicted {'needs' if predictions['critical_lr'] else 'no'} "
                            f"warm-up, truth {'needs' if truth else 'no'} ({len(worse)}/{len(seeds)} seeds worse without)")
        mean = lambda kind: sum(runs[key].get((kind, s), math.inf) for s in seeds) / max(len(seeds), 1)
        table.append({"scheme": key[0], "lr": key[1], "median_lr_c": advice["median_lr_c"],
                      "threshold_ratio": advice["median_threshold_ratio"], "predicted": int(predictions["critical_lr"]),
                      "curvature_predicted": int(predictions["curvature"]), "truth": int(truth),
                      "seeds_worse_without": len(worse), "seeds": len(seeds),
                      "mean_valid_loss_nowarm": mean("nowarm"), "mean_valid_loss_warm": mean("warm")})
    if not table:
        sys.exit("advise_confusion: no advise cells in " + args.dir)
    table.sort(key=lambda t: (t["scheme"], t["lr"]))
    with open(os.path.join(args.dir, "advise_grid.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(table[0]))
        w.writeheader()
        w.writerows(table)

    md = [f"# normlab advise against {len(table)} configurations ({args.dir})", ""]
    for rule, title in (("critical_lr", "the advisor's rule: needs warm-up iff lr > median lr_c"),
                        ("curvature", "for comparison: needs warm-up iff lambda_1(P^-1 H) x lr above the threshold")):
        c = counts[rule]
        correct = c[(True, True)] + c[(False, False)]
        md += [f"## {title}: {correct} of {len(table)} right", "",
               "| | truth: needs warm-up | truth: trains without |", "|---|---:|---:|",
               f"| predicted: needs warm-up | {c[(True, True)]} | {c[(True, False)]} |",
               f"| predicted: trains without | {c[(False, True)]} | {c[(False, False)]} |", ""]
    md += ["## The advisor's failures", ""] + [f"- {x}" for x in failures or ["none"]] + [""]
    md += ["| scheme | lr | median lr_c | lambda x lr / threshold | predicted | truth | seeds worse without | "
           "valid loss without / with warm-up |", "|---|---:|---:|---:|---|---|---:|---|"]
    for t in table:
        md.append(f"| {t['scheme']} | {t['lr']:g} | {t['median_lr_c']:.3g} | {t['threshold_ratio']:.3g} | "
                  f"{'needs' if t['predicted'] else 'no'} | {'needs' if t['truth'] else 'no'} | "
                  f"{t['seeds_worse_without']}/{t['seeds']} | {t['mean_valid_loss_nowarm']:.3f} / "
                  f"{t['mean_valid_loss_warm']:.3f} |")
    text = "\n".join(md) + "\n"
    write_text(os.path.join(args.dir, "advise_confusion.md"), text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
