#!/usr/bin/env python3
"""Tables of recipes/xiong_fig5.toml's cells, at any length (docs/results.md, "BERT pre-training").

    python3 scripts/xiong_fig5.py RUN_DIR [--pretraining-csv FILE] [--finetune-csv FILE]

Reads RUN_DIR/cells/*: every pre-training cell's validation records (metrics.jsonl) and every
fine-tuning cell's (`ft-TASK-SCHEME_init-from-update=U[_lr=LR]`), whatever its update numbers, so that a run
longer than the recipe's scales (its command lines from `--dry-run`, rewritten) reads the same way
as a recipe run. Writes the two csvs docs/data/encoder-only/ keeps (default RUN_DIR/pretraining.csv,
RUN_DIR/finetune.csv: every record) and prints the markdown tables: the validation loss against
updates, and each fine-tuning cell's best dev accuracy, per fine-tuning lr and at the best lr of
each checkpoint ("best": the paper's search over the lr, chosen on the dev set it reports), with
the mean over the checkpoints (the "best" row's mean is the rule of the recipe's Fig. 5(b, c)
claims)."""
import argparse
import csv
import io
import json
import os
import re
import statistics
import sys

from atomic_write import write_text

FINETUNE = re.compile(r"^ft-(?P<task>.+)-(?P<scheme>post-ln|pre-ln)_init-from-update=(?P<update>\d+)"
                      r"(_lr=(?P<lr>[^_]+))?$")


def records(cell):
    path = os.path.join(cell, "metrics.jsonl")
    if not os.path.isfile(path):
        sys.exit(f"xiong_fig5.py: {path}: no such file (an unfinished cell?)")
    return [json.loads(line) for line in open(path)]


def write_csv(path, header, rows):
    text = io.StringIO()
    w = csv.writer(text, lineterminator="\n")
    w.writerow(header)
    w.writerows(rows)
    write_text(path, text.getvalue())


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("run")
    p.add_argument("--pretraining-csv")
    p.add_argument("--finetune-csv")
    a = p.parse_args()
    cells = os.path.join(a.run, "cells")
    if not os.path.isdir(cells):
        sys.exit(f"xiong_fig5.py: {cells}: no such folder")
    pre, fine = [], []
    for name in sorted(os.listdir(cells)):
        d = os.path.join(cells, name)
        m = FINETUNE.match(name)
        if m:
            for r in records(d):
                if r.get("valid_accuracy") is not None:
                    fine.append((m["task"], m["scheme"], int(m["update"]), m["lr"] or "", r["step"],
                                 r["valid_accuracy"], r["valid_loss"]))
        elif name.startswith(("post-ln", "pre-ln")):
            for r in records(d):
                if r.get("valid_loss") is not None:
                    pre.append((name, r["step"], r.get("epoch", ""), r["valid_loss"], r.get("valid_tokens", ""),
                                r.get("wall_s", "")))
    if not pre and not fine:
        sys.exit(f"xiong_fig5.py: no cell of recipes/xiong_fig5.toml with records in {cells}")
    write_csv(a.pretraining_csv or os.path.join(a.run, "pretraining.csv"),
                 ["cell", "step", "epoch", "valid_loss", "valid_tokens", "wall_s"], pre)
    write_csv(a.finetune_csv or os.path.join(a.run, "finetune.csv"),
                 ["task", "scheme", "pretraining_update", "finetune_lr", "finetune_step", "valid_accuracy",
                  "valid_loss"], fine)

    names = sorted({r[0] for r in pre})
    steps = sorted({r[1] for r in pre})
    loss = {(r[0], r[1]): r[3] for r in pre}
    if names:
        print("| cell | " + " | ".join(str(s) for s in steps) + " |")
        print("|---|" + "---:|" * len(steps))
        for n in names:
            print(f"| {n} | " + " | ".join(f"{loss[(n, s)]:.3f}" if (n, s) in loss else "" for s in steps) + " |")
    best = {}  # (task, scheme, lr, update) -> best dev accuracy; lr "best": the best over the lrs
    for task, scheme, update, lr, _, acc, _ in fine:
        for key in ((task, scheme, lr, update), (task, scheme, "best", update)):
            best[key] = max(acc, best.get(key, 0.0))
    updates = sorted({k[3] for k in best})
    if best:
        print("\n| task | scheme | fine-tuning lr | " + " | ".join(f"from update {u}" for u in updates) + " | mean |")
        print("|---|---|---|" + "---:|" * (len(updates) + 1))
        for task, scheme, lr in sorted({k[:3] for k in best}, key=lambda k: (k[0], k[1], k[2] == "best", k[2])):
            v = [best.get((task, scheme, lr, u)) for u in updates]
            mean = statistics.fmean(x for x in v if x is not None)
            print(f"| {task} | {scheme} | {lr or '-'} | " + " | ".join("" if x is None else f"{x:.4f}" for x in v)
                  + f" | {mean:.4f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
