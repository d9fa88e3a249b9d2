#!/usr/bin/env python3
"""LR sensitivity (Wortsman et al. 2023) of each configuration of recipes/lr_sensitivity.toml.

A configuration is a cell name's prefix and scheme (e.g. `nowarm` and post-ln) over the lr grid.
From each training cell: its final validation loss (the last validation record of metrics.jsonl;
+inf when the run diverged), its loss at init (the `init_valid_loss` record of
`--valid-at-init`), the largest attention logit and the largest output log Z of its last update
and of the whole run (trace/attention_logits.csv, trace/output_logits.csv of `--trace-logits`).
LR sensitivity = mean over the grid of (min(final loss, loss at init) - best final loss on the
grid): 0 when every lr reaches the best, at most the loss at init minus the best when they all
fail. Writes DIR/lr_sensitivity.md (one table of sensitivities, one of every cell) and
DIR/lr_sensitivity.csv (one row per cell), prints the markdown. Exit 1 when a cell is missing,
failed or lacks its records.
"""
import argparse
import csv
import io
import json
import math
import os
import sys
from collections import defaultdict

from atomic_write import write_text


def last_valid_and_init(metrics_path):
    final, init, diverged = None, None, False
    for line in open(metrics_path):
        r = json.loads(line)
        if "valid_loss" in r:
            final = r["valid_loss"]
        if "init_valid_loss" in r:
            init = r["init_valid_loss"]
        if r.get("event") == "diverged":
            diverged = True
    return (math.inf if diverged or final is None else final), init


def column_max(path, column, step=None):
    """The largest value of `column` in the CSV at `path` (of rows with that step when given)."""
    values = [float(r[column]) for r in csv.DictReader(open(path)) if step is None or int(r["step"]) == step]
    return max(values) if values else math.nan


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dir", help="the `normlab run recipes/lr_sensitivity.toml` folder")
    args = parser.parse_args()
    rows = list(csv.DictReader(open(os.path.join(args.dir, "summary.csv"))))
    cells = []
    for r in rows:
        if r["command"] != "train":
            continue
        if r["status"] not in ("ok", "diverged"):
            sys.exit(f"lr_sensitivity: cell {r['cell']} {r['status']}: rerun `normlab run` first")
        d = os.path.join(args.dir, "cells", r["cell"])
        final, init = last_valid_and_init(os.path.join(d, "metrics.jsonl"))
        if init is None:
            sys.exit(f"lr_sensitivity: {d}/metrics.jsonl has no init_valid_loss record (train --valid-at-init)")
        trace = os.path.join(d, "trace")
        last = max((int(x["step"]) for x in csv.DictReader(open(os.path.join(trace, "output_logits.csv")))), default=0)
        cells.append({
            "cell": r["cell"], "config": r["cell"].split("_", 1)[0], "scheme": r["scheme"], "lr": float(r["lr"]),
            "final_valid_loss": final if r["status"] == "ok" else math.inf, "init_valid_loss": init,
            "max_attention_logit_last": column_max(os.path.join(trace, "attention_logits.csv"), "max_logit", last),
            "max_attention_logit_run": column_max(os.path.join(trace, "attention_logits.csv"), "max_logit"),
            "max_log_z_last": column_max(os.path.join(trace, "output_logits.csv"), "max_log_z", last),
            "max_log_z_run": column_max(os.path.join(trace, "output_logits.csv"), "max_log_z"),
        })
    groups = defaultdict(list)
    for c in cells:
        groups[(c["config"], c["scheme"])].append(c)
    summary = []
    for (config, scheme), group in sorted(groups.items()):
        group.sort(key=lambda c: c["lr"])
        best = min(c["final_valid_loss"] for c in group)
        sensitivity = sum(min(c["final_valid_loss"], c["init_valid_loss"]) - best for c in group) / len(group)
        best_lr = min(group, key=lambda c: c["final_valid_loss"])["lr"]
        summary.append((config, scheme, sensitivity, best, best_lr, group))

    fmt = lambda x: "diverged" if x == math.inf else f"{x:.3f}"
    lrs = sorted({c["lr"] for c in cells})
    md = [f"# LR sensitivity ({args.dir})", "",
          "LR sensitivity = mean over the lr grid of min(final valid loss, loss at init) - best final valid loss "
          "(Wortsman et al. 2023).", "",
          "| configuration | scheme | LR sensitivity | best final valid loss | at lr | " +
          " | ".join(f"lr {lr:g}" for lr in lrs) + " |",
          "|---|---|---:|---:|---:|" + "---:|" * len(lrs)]
    for config, scheme, sensitivity, best, best_lr, group in summary:
        by_lr = {c["lr"]: c for c in group}
        md.append(f"| {config} | {scheme} | {sensitivity:.3f} | {fmt(best)} | {best_lr:g} | " +
                  " | ".join(fmt(by_lr[lr]["final_valid_loss"]) if lr in by_lr else "" for lr in lrs) + " |")
    md += ["", "Per cell: loss at init, final valid loss, the largest attention logit |q.k|/sqrt(D) and output "
           "log Z at the last update and over the run.", "",
           "| cell | loss at init | final valid loss | max logit (last) | max logit (run) | max log Z (last) | "
           "max log Z (run) |", "|---|---:|---:|---:|---:|---:|---:|"]
    for c in sorted(cells, key=lambda c: (c["config"], c["scheme"], c["lr"])):
        md.append(f"| {c['cell']} | {c['init_valid_loss']:.3f} | {fmt(c['final_valid_loss'])} | "
                  f"{c['max_attention_logit_last']:.2f} | {c['max_attention_logit_run']:.2f} | "
                  f"{c['max_log_z_last']:.2f} | {c['max_log_z_run']:.2f} |")
    text = "\n".join(md) + "\n"
    write_text(os.path.join(args.dir, "lr_sensitivity.md"), text)
    table = io.StringIO()
    w = csv.DictWriter(table, fieldnames=list(cells[0].keys()) + ["lr_sensitivity"])
    w.writeheader()
    sens = {(s[0], s[1]): s[2] for s in summary}
    for c in sorted(cells, key=lambda c: (c["config"], c["scheme"], c["lr"])):
        w.writerow({**c, "lr_sensitivity": sens[(c["config"], c["scheme"])]})
    write_text(os.path.join(args.dir, "lr_sensitivity.csv"), table.getvalue())
    print(text, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
