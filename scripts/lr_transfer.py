#!/usr/bin/env python3
"""LR transfer across width (recipes/lr_transfer_width.toml, lm_lr_transfer.toml): how far the best lr moves, in grid steps.

A configuration is (parametrisation, scheme, warm-up: `warmup-steps` 0 or not) over the widths
(the cells' `d-model`) and the lr grid. From summary.csv the training cells, and from each one's
metrics.jsonl its final validation loss (the last validation record; +inf when it diverged). Per
configuration and width the best lr is the grid's argmin of the final loss (none when every lr
diverged); the shift is the largest minus the smallest best lr's
index on the sorted lr grid over the widths, in grid steps (the grid of every cell's lrs together:
lm_lr_transfer's u-mup grid continues the sp/mup grid). The issue's claims, decided here
because the recipe's rule language has no argmin:
- under mup and u-mup the best lr moves by at most one grid step across the widths (shift <= 1);
- under sp it moves more (shift > 1);
- the warm-up needed at the best lr: per (parametrisation, scheme, width), at the best lr of the
  runs with warm-up, the final loss without warm-up minus with (> 0.05: warm-up needed there).
Writes DIR/lr_transfer.md and DIR/lr_transfer.csv (one row per configuration and width), prints
the markdown. Exit 1 when a training cell is missing or failed.
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

NEEDED = 0.05  # nats: no warm-up costs more than this at the best lr -> "needs warm-up"


def last_valid_loss(metrics_path):
    """The last validation record's loss (+inf when the run diverged or never validated)."""
    final, diverged = None, False
    for line in open(metrics_path):
        r = json.loads(line)
        if r.get("valid_loss") is not None:
            final = r["valid_loss"]
        diverged = diverged or r.get("event") == "diverged"
    return math.inf if diverged or final is None else final


def read_cells(out):
    cells = []
    for r in csv.DictReader(open(os.path.join(out, "summary.csv"), newline="")):
        if r["command"] != "train":
            continue
        if r["status"] not in ("ok", "diverged"):
            sys.exit(f"lr_transfer: cell {r['cell']} {r['status']}: rerun `normlab run` first")
        loss = last_valid_loss(os.path.join(out, "cells", r["cell"], "metrics.jsonl")) if r["status"] == "ok" else math.inf
        cells.append({"cell": r["cell"], "width": int(r["d-model"]), "lr": float(r["lr"]),
                      "parametrisation": r["parametrisation"], "scheme": r["scheme"],
                      "warm": int(r["warmup-steps"]) > 0, "loss": loss})
    return cells


def analyse(cells):
    """{(parametrisation, scheme, warm): {width: {lr: loss}}}, the sorted lr grid, and per
    configuration (best lr index per width, shift in grid steps or None)."""
    lrs = sorted({c["lr"] for c in cells})
    table = defaultdict(lambda: defaultdict(dict))
    for c in cells:
        table[(c["parametrisation"], c["scheme"], c["warm"])][c["width"]][c["lr"]] = c["loss"]
    best = {}
    for config, by_width in table.items():
        idx = {}
        for w, by_lr in by_width.items():
            finite = [(loss, lr) for lr, loss in by_lr.items() if math.isfinite(loss)]
            idx[w] = lrs.index(min(finite)[1]) if finite else None
        known = [i for i in idx.values() if i is not None]
        shift = max(known) - min(known) if known and len(known) == len(idx) else None
        best[config] = (idx, shift)
    return table, lrs, best


def write_results(out, stem, text, rows, fields):
    """OUT/STEM.md (the markdown text) and OUT/STEM.csv (rows, columns `fields`), each written to a
    temporary file and renamed into place."""
    table = io.StringIO()
    writer = csv.DictWriter(table, fieldnames=fields)
    writer.writeheader()
    writer.writerows(rows)
    write_text(os.path.join(out, stem + ".md"), text)
    write_text(os.path.join(out, stem + ".csv"), table.getvalue())


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dir", help="the `normlab run recipes/lr_transfer_width.toml` folder")
    args = parser.parse_args()
    cells = read_cells(args.dir)
    if not cells:
        sys.exit("lr_transfer: no training cells in summary.csv")
    table, lrs, best = analyse(cells)
    fmt = lambda x: "diverged" if x == math.inf else f"{x:.3f}"
    warm_name = lambda w: "warm-up" if w else "no warm-up"
    md = [f"# LR transfer across width ({args.dir})", "",
          f"Lr grid: {', '.join(f'{lr:g}' for lr in lrs)}. Best lr: the grid's argmin of the final validation "
          "loss at each width; shift: the largest minus the smallest best lr's index over the widths (grid steps).", "",
          "| parametrisation | scheme | warm-up | best lr per width | shift (grid steps) | verdict |",
          "|---|---|---|---|---:|---|"]
    rows = []
    for config in sorted(table):
        p, s, warm = config
        idx, shift = best[config]
        per = ", ".join(f"{w}: {lrs[i]:g}" if i is not None else f"{w}: none" for w, i in sorted(idx.items()))
        if shift is None:
            verdict = "undecided (a width without a finite loss)"
        elif p in ("mup", "u-mup"):
            verdict = "transfers (<= 1 step)" if shift <= 1 else "does not transfer (> 1 step)"
        else:
            verdict = "moves (> 1 step)" if shift > 1 else "stays (<= 1 step)"
        md.append(f"| {p} | {s} | {warm_name(warm)} | {per} | {'' if shift is None else shift} | {verdict} |")
    md += ["", f"Warm-up needed at the best lr (the best lr of the runs with warm-up; needed: no warm-up costs "
           f"more than {NEEDED} nats there).", "",
           "| parametrisation | scheme | width | best lr (warm-up) | loss with | loss without | cost of no warm-up | needed |",
           "|---|---|---:|---:|---:|---:|---:|---|"]
    for (p, s, warm) in sorted(table):
        if not warm:
            continue
        idx, _ = best[(p, s, True)]
        if (p, s, False) not in table:  # warm-up runs only (lm_lr_transfer): the best lrs, no cost
            for w in sorted(idx):
                i = idx[w]
                rows.append({"parametrisation": p, "scheme": s, "width": w,
                             "best_lr_warm": "" if i is None else lrs[i], "best_lr_nowarm": "",
                             "shift_warm": "" if best[(p, s, True)][1] is None else best[(p, s, True)][1],
                             "shift_nowarm": "", "loss_warm_at_best": math.inf if i is None else table[(p, s, True)][w][lrs[i]],
                             "loss_nowarm_at_best": "", "warmup_cost_at_best": ""})
            continue
        for w in sorted(idx):
            i = idx[w]
            with_, without, cost = (math.inf, math.inf, math.nan) if i is None else (
                table[(p, s, True)][w][lrs[i]], table[(p, s, False)][w].get(lrs[i], math.nan), None)
            if i is not None:
                cost = without - with_
            needed = "" if math.isnan(cost) else ("yes" if cost > NEEDED else "no")
            md.append(f"| {p} | {s} | {w} | {'' if i is None else f'{lrs[i]:g}'} | {fmt(with_)} | {fmt(without)} | "
                      f"{'' if math.isnan(cost) else fmt(cost)} | {needed} |")
            rows.append({"parametrisation": p, "scheme": s, "width": w,
                         "best_lr_warm": "" if i is None else lrs[i],
                         "best_lr_nowarm": "" if best[(p, s, False)][0].get(w) is None else lrs[best[(p, s, False)][0][w]],
                         "shift_warm": "" if best[(p, s, True)][1] is None else best[(p, s, True)][1],
                         "shift_nowarm": "" if best[(p, s, False)][1] is None else best[(p, s, False)][1],
                         "loss_warm_at_best": with_, "loss_nowarm_at_best": without, "warmup_cost_at_best": cost})
    text = "\n".join(md) + "\n"
    write_results(args.dir, "lr_transfer", text, rows, list(rows[0].keys()) if rows else ["parametrisation"])
    print(text, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
