#!/usr/bin/env python3
"""u-muP's alphas (recipes/umup_alphas.toml): each alpha's best value per width and how far it moves.

From summary.csv the training cells: `WIDTH-default` (every alpha 1) and `WIDTH-ALPHA` with the
grid column `umup-alpha-ALPHA`; each cell's final validation loss as scripts/lr_transfer.py reads
it (+inf when it diverged). Per alpha and width the values are the sweep's and the default's 1;
the best value is the argmin of the final loss over them; the shift is the largest minus the
smallest best value's index on the sorted value grid over the widths, in grid steps (factor 2).
Blake et al. 2024's claims, decided here because the recipe's rule language has no argmin:
- the default is near-optimal: the best value of each alpha gains at most NEAR nats on the default;
- the best value transfers across width: shift <= 1.
Writes DIR/umup_alphas.md and DIR/umup_alphas.csv (one row per alpha and width), prints the
markdown. Exit 1 when a training cell is missing or failed.
"""
import argparse
import csv
import math
import os
import sys
from collections import defaultdict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lr_transfer import last_valid_loss, write_results  # noqa: E402

NEAR = 0.05  # nats
PREFIX = "umup-alpha-"


def read_cells(out):
    """{alpha: {width name: {value: loss}}} with every alpha's default 1 from WIDTH-default."""
    defaults, swept = {}, defaultdict(lambda: defaultdict(dict))
    for r in csv.DictReader(open(os.path.join(out, "summary.csv"), newline="")):
        if r["command"] != "train":
            continue
        if r["status"] not in ("ok", "diverged"):
            sys.exit(f"umup_alphas: cell {r['cell']} {r['status']}: rerun `normlab run` first")
        loss = last_valid_loss(os.path.join(out, "cells", r["cell"], "metrics.jsonl")) if r["status"] == "ok" else math.inf
        width = r["cell"].split("-", 1)[0]
        given = [(k[len(PREFIX):], float(v)) for k, v in r.items() if k and k.startswith(PREFIX) and v]
        if not given:
            defaults[width] = loss
        for alpha, value in given:
            swept[alpha][width][value] = loss
    for alpha, by_width in swept.items():
        for width, by_value in by_width.items():
            if width not in defaults:
                sys.exit(f"umup_alphas: no {width}-default cell to compare {alpha} with")
            by_value[1.0] = defaults[width]
    return swept


def analyse(swept):
    """Rows per (alpha, width): best value, its loss, the default's, the gain; shift per alpha."""
    rows, shifts = [], {}
    for alpha in sorted(swept):
        values = sorted({v for by_value in swept[alpha].values() for v in by_value})
        best = {}
        for width, by_value in sorted(swept[alpha].items()):
            loss, value = min((l, v) for v, l in by_value.items())
            best[width] = values.index(value)
            rows.append({"alpha": alpha, "width": width, "best_value": value, "best_loss": loss,
                         "default_loss": by_value[1.0], "gain_on_default": by_value[1.0] - loss,
                         **{f"loss_at_{v:g}": by_value.get(v, "") for v in values}})
        shifts[alpha] = max(best.values()) - min(best.values())
    return rows, shifts


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dir", help="the `normlab run recipes/umup_alphas.toml` folder")
    args = parser.parse_args()
    swept = read_cells(args.dir)
    if not swept:
        sys.exit("umup_alphas: no alpha cells in summary.csv")
    rows, shifts = analyse(swept)
    values = sorted({v for by_width in swept.values() for by_value in by_width.values() for v in by_value})
    fmt = lambda x: "diverged" if x == math.inf else f"{x:.3f}"
    md = [f"# u-muP's alphas ({args.dir})", "",
          f"Final validation loss per alpha value (the others at 1); best: the argmin; gain: the default's "
          f"loss minus the best's (near-optimal: <= {NEAR}); shift: how far the best value moves across the "
          "widths (grid steps of a factor 2).", "",
          "| alpha | width | " + " | ".join(f"{v:g}" for v in values) + " | best | gain on 1 | shift |",
          "|---|---|" + "---:|" * len(values) + "---:|---:|---:|"]
    for r in rows:
        cells = " | ".join(fmt(r[f"loss_at_{v:g}"]) if r[f"loss_at_{v:g}"] != "" else "" for v in values)
        md.append(f"| {r['alpha']} | {r['width']} | {cells} | {r['best_value']:g} | {fmt(r['gain_on_default'])} | "
                  f"{shifts[r['alpha']]} |")
    near = sum(r["gain_on_default"] <= NEAR for r in rows)
    moved = sum(s <= 1 for s in shifts.values())
    md += ["", f"Defaults near-optimal (gain <= {NEAR}) in {near} of {len(rows)} (alpha, width) pairs; "
           f"best value within one grid step across the widths for {moved} of {len(shifts)} alphas."]
    text = "\n".join(md) + "\n"
    fields = sorted({k for r in rows for k in r}, key=lambda k: (k.startswith("loss_at_"), k))
    write_results(args.dir, "umup_alphas", text, rows, fields)
    print(text, end="")


if __name__ == "__main__":
    main()
