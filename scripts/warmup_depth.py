#!/usr/bin/env python3
"""Which configurations need warm-up at each depth (issue 37 §1's grid over depths).

    python3 scripts/warmup_depth.py LABEL=ARMS.csv:PROBE.csv [LABEL=... ...] [--seeds N] [--md FILE]

Each LABEL names a grid of recipes/warmup_auto.toml's arms run at one depth (`--set layers=N`),
kept as scripts/warmup_auto.py and scripts/warmup_predictor.py write them
(docs/data/warmup_auto/). Per configuration (scheme, lr) and grid: whether it needs warm-up
(scripts/warmup_auto.py's truth, over the seeds 1..N only, so that a six-seed grid compares with
three-seed ones), in how many seeds w0 was worse, and the probe's median loss drop."""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from atomic_write import write_text  # noqa: E402
from warmup_gate import Grid  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("grids", nargs="+", metavar="LABEL=ARMS.csv:PROBE.csv")
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--md")
    a = p.parse_args()
    grids = []
    for spec in a.grids:
        label, _, files = spec.partition("=")
        arms, _, probe = files.partition(":")
        if not label or not arms or not probe:
            sys.exit(f"warmup_depth.py: {spec}: give LABEL=ARMS.csv:PROBE.csv")
        g = Grid(arms, probe, 2, None, "w0")  # its planned updates and vocabulary are not used here
        g.seeds = {c: [k for k in ks if k <= a.seeds] for c, ks in g.seeds.items()}
        if any(len(ks) < a.seeds for ks in g.seeds.values()):
            sys.exit(f"warmup_depth.py: {arms}: fewer than {a.seeds} seeds in a configuration")
        grids.append((label, g))
    configs = sorted(set.intersection(*(set(g.configs) for _, g in grids)))
    md = ["| scheme | lr | " + " | ".join(f"{label}: needs warm-up (seeds), median drop" for label, _ in grids) + " |",
          "|---|---:|" + "---|" * len(grids)]
    for c in configs:
        cells = []
        for _, g in grids:
            worse = g.worse_seeds(c)
            drop = g.median(c, "loss_drop")
            cells.append(f"{'**yes**' if g.needs(c) else 'no'} ({worse}/{len(g.seeds[c])}), {drop:.2f}")
        md.append(f"| {c[0]} | {c[1]:g} | " + " | ".join(cells) + " |")
    md.append("| all | | " + " | ".join(f"{sum(g.needs(c) for c in configs)} of {len(configs)}" for _, g in grids) + " |")
    text = "\n".join(md) + "\n"
    if a.md:
        write_text(a.md, text)
    print(text, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
