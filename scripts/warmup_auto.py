#!/usr/bin/env python3
"""Tables of recipes/warmup_auto.toml's run (docs/results.md, "Warm-up that chooses itself").

    python3 scripts/warmup_auto.py RUN_DIR [--with KEPT.csv ...] [--csv FILE] [--md FILE]

Reads every cell's metrics.jsonl (the last validation loss; a diverged run counts as +inf) and an
auto cell's warmup.jsonl (the ramp's length, its measurements' seconds). Writes RUN_DIR/
warmup_auto.csv (one row per cell and seed: what docs/data/warmup_auto/ keeps) and RUN_DIR/
warmup_auto.md (the tables), and prints the summary. `--with` adds the rows of a csv this script wrote (docs/data/warmup_auto/),
so that a new arm run today is compared with the kept arms without re-running them; a cell of
RUN_DIR replaces the kept row of the same arm, scheme, lr and seed.

One margin everywhere: a loss a is worse than b when a > b + max(0.02, 0.01 b).
- tuned: per configuration (scheme, lr), the fixed warm-up (w0, w1, w5, w10, w25) of lowest mean
  final loss over the seeds; an arm meets the aim when its mean is not worse than tuned's.
- needs warm-up (the truth of issue 37 §1): w0 is worse than the best of w1..w25 of the same seed
  in at least two thirds of the seeds (2 of 3; 4 of 6).
- never diverging where a tuned warm-up trains: per seed, an arm diverged while some fixed arm did not.
- the noise ceiling: the fixed arm best in one seed, its mean over the other seeds against their
  tuned warm-up; a rule that does not see the seed cannot expect to beat it (a rough ceiling, on
  the low side: its means are over one seed fewer than the aim's).
- time: an auto cell's wall time against the mean of the same configuration and seed's fixed
  arms, and the share of its wall time spent measuring (warmup.jsonl's seconds)."""
import argparse
import csv
import io
import itertools
import json
import math
import os
import re
import statistics
import sys

from atomic_write import write_text

FIXED = ["w0", "w1", "w5", "w10", "w25"]
# auto: the default rule (--warmup-auto-every-ratio 0.05); autoN: --warmup-auto-every N updates;
# autogi: the default rule on GI-Adam (--adam-init-v grad-squared); gate, gatew25: the default rule
# and w25 behind --warmup-gate (no warm-up unless the 2% probe's loss drop exceeds it).
OTHERS = ["auto", "auto5", "auto10", "auto20", "auto25", "auto100", "autogi", "gate", "gatew25", "radam", "giadam",
          "mayarats"]
KEPT_NUMBERS = {"lr": float, "seed": int, "valid_loss": float, "diverged": int, "start_factor": float,
                "measure_s": float}
CELL = re.compile(r"^(?P<arm>[a-z0-9]+)_lr=(?P<lr>[^_]+)_scheme=(?P<scheme>.+)_seed=(?P<seed>\d+)$")


def margin(b):
    return max(0.02, 0.01 * b) if math.isfinite(b) else 0.0


def worse(a, b):
    return a > b + margin(b)


def needs_warmup(seeds_worse, seeds):
    """The truth of issue 37 §1: w0 worse than the best of w1..w25 of the same seed in at least two
    thirds of the seeds (2 of 3 as the issue states it; 2 of 2, 4 of 6)."""
    return 3 * seeds_worse >= 2 * seeds


def w0_worse(loss, s, lr, k):
    """Whether w0 ends worse than the best of w1..w25 in seed k (no, where w0 or every ramp is missing)."""
    ramps = [v for v in (loss(x, s, lr, k) for x in FIXED[1:]) if v is not None]
    w0 = loss("w0", s, lr, k)
    return w0 is not None and bool(ramps) and worse(w0, min(ramps))


def truth_replicate(loss, configs, seeds):
    """The truth measured twice: the seeds split into two halves (every split once), each half's truth
    by needs_warmup, and one half's truth taken as a prediction of the other's, both ways (so that
    recall and precision are one number, 2 TP / (positives of both halves)). Issue 37 §1 asks a
    predictor for recall and precision 0.9; a replicate of the truth itself shows how far that is
    reachable at all. With it, what a predictor that knew each configuration's chance p of w0 being
    worse in a seed (its share of all the seeds here: a plug-in estimate) would expect against the
    truth of a half: q = P(the half's truth says yes) = P(Binomial(half, p) meets needs_warmup);
    saying yes where q >= 1/2 (and, stricter, where q > 1/2) it expects sum q over its yeses as true
    positives of sum q over all. Returns None with fewer than 4 seeds or an odd number, else a dict:
    splits, agree (configuration-splits where the halves agree), cases, both (2 TP), positives (of
    both halves), and oracle: [(recall, precision) for q >= 1/2, for q > 1/2]."""
    if len(seeds) < 4 or len(seeds) % 2:
        return None
    half = len(seeds) // 2
    splits = [a for a in itertools.combinations(seeds, half) if a[0] == seeds[0]]
    worse_in = {c: {k for k in seeds if w0_worse(loss, *c, k)} for c in configs}
    agree = both = positives = 0
    for a in splits:
        b = [k for k in seeds if k not in a]
        for c in configs:
            ta, tb = (needs_warmup(len(worse_in[c].intersection(h)), half) for h in (a, b))
            agree += ta == tb
            both += 2 * (ta and tb)
            positives += ta + tb

    def chance(p):
        return sum(math.comb(half, k) * p ** k * (1 - p) ** (half - k) for k in range(half + 1) if needs_warmup(k, half))

    q = [chance(len(worse_in[c]) / len(seeds)) for c in configs]
    oracle = []
    for yes in ([x for x in q if x >= 0.5], [x for x in q if x > 0.5]):
        oracle.append((sum(yes) / sum(q) if sum(q) else math.nan, sum(yes) / len(yes) if yes else math.nan))
    return {"splits": len(splits), "agree": agree, "cases": len(splits) * len(configs), "both": both,
            "positives": positives, "oracle": oracle}


def replicate_line(rep):
    """truth_replicate's result as the tables' sentences."""
    (r1, p1), (r2, p2) = rep["oracle"]
    return (f"The truth measured twice (the seeds in two halves, each of the {rep['splits']} splits; each half's "
            f"truth by the same two-thirds rule): the halves agree on {rep['agree']} of {rep['cases']} configurations "
            f"x splits ({100 * rep['agree'] / rep['cases']:.0f}%); one half's truth as a prediction of the other's, "
            f"both ways: recall = precision = {rep['both']}/{rep['positives']} = "
            f"{rep['both'] / rep['positives'] if rep['positives'] else float('nan'):.2f}. A predictor that knew each "
            f"configuration's chance of w0 being worse in a seed (its share of these seeds) would expect against a "
            f"half's truth recall {r1:.2f} at precision {p1:.2f} (saying yes where that truth is at least as likely "
            f"as not), or {r2:.2f} at {p2:.2f} (where it is likelier).")


def read_cell(path):
    recs = [json.loads(l) for l in open(os.path.join(path, "metrics.jsonl"))]
    if any(r.get("event") == "diverged" for r in recs):
        return math.inf, None
    valid = [r["valid_loss"] for r in recs if r.get("valid_loss") is not None]
    walls = [r["wall_s"] for r in recs if "wall_s" in r]
    if not valid:
        raise SystemExit(f"warmup_auto.py: {path}/metrics.jsonl has no validation record (an unfinished cell?)")
    return valid[-1], (walls[-1] if walls else None)


def read_ramp(path):
    f = os.path.join(path, "warmup.jsonl")
    if not os.path.exists(f):
        return {}
    recs = [json.loads(l) for l in open(f)]
    done = [r["step"] for r in recs if r["decision"] == "done"]
    return {"ramp_updates": done[0] if done else "",
            "start_factor": recs[0]["factor"],
            "holds": sum(r["decision"] == "hold" for r in recs),
            "catapults": sum(r["decision"] == "catapult" for r in recs),
            "measure_s": sum(r.get("seconds", 0.0) for r in recs)}


def read_kept(path):
    """The rows of a csv this script wrote, typed as read_cell's rows are (empty fields dropped)."""
    if not os.path.isfile(path):
        sys.exit(f"warmup_auto.py: --with {path}: no such file")
    rows = []
    for line, r in enumerate(csv.DictReader(open(path)), start=2):
        try:
            row = {k: KEPT_NUMBERS.get(k, str)(v) for k, v in r.items() if v != ""}
            row["wall_s"] = float(r["wall_s"]) if r.get("wall_s") else None
            if row["arm"] not in FIXED + OTHERS:
                raise ValueError(f"unknown arm {row['arm']}")
        except (KeyError, ValueError) as e:
            sys.exit(f"warmup_auto.py: {path}:{line}: not a row of this script's csv ({e})")
        rows.append(row)
    return rows


def cross_seed_oracle(loss, configs, seeds):
    """The noise ceiling of the aim: per configuration and seed j, the fixed arm best in seed j, its
    mean over the other seeds against the tuned warm-up of those seeds (the best fixed arm's mean
    there). (within the margin, cases). No rule that cannot see the seed should do better."""
    met = cases = 0
    for s, lr in configs:
        have = [k for k in seeds if all(loss(x, s, lr, k) is not None for x in FIXED)]
        for j in have if len(have) > 1 else []:
            rest = [k for k in have if k != j]
            mean = lambda x: statistics.fmean(loss(x, s, lr, k) for k in rest)
            pick = min(FIXED, key=lambda x: loss(x, s, lr, j))
            tuned = min(mean(x) for x in FIXED)
            cases += 1
            met += int(not worse(mean(pick), tuned))
    return met, cases


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("run")
    p.add_argument("--with", dest="kept", action="append", default=[], metavar="KEPT.csv")
    p.add_argument("--csv")
    p.add_argument("--md")
    a = p.parse_args()
    cells = os.path.join(a.run, "cells")
    if not os.path.isdir(cells) and not a.kept:
        sys.exit(f"warmup_auto.py: {cells}: no such folder (run recipes/warmup_auto.toml into {a.run} first)")
    rows = []
    for name in sorted(os.listdir(cells)) if os.path.isdir(cells) else []:
        m = CELL.match(name)
        if not m or m["arm"] not in FIXED + OTHERS:
            continue
        loss, wall = read_cell(os.path.join(cells, name))
        row = {"arm": m["arm"], "scheme": m["scheme"], "lr": float(m["lr"]), "seed": int(m["seed"]),
               "valid_loss": loss, "diverged": int(not math.isfinite(loss)), "wall_s": wall}
        row.update(read_ramp(os.path.join(cells, name)))
        rows.append(row)
    key = lambda r: (r["arm"], r["scheme"], r["lr"], r["seed"])
    ran = {key(r) for r in rows}
    for path in a.kept:
        rows = [r for r in read_kept(path) if key(r) not in ran] + rows
    if not rows:
        sys.exit(f"warmup_auto.py: no cell of recipes/warmup_auto.toml in {cells}")

    res = {key(r): r for r in rows}
    configs = sorted({(r["scheme"], r["lr"]) for r in rows})
    seeds = sorted({r["seed"] for r in rows})
    arms = [x for x in FIXED + OTHERS if any(r["arm"] == x for r in rows)]

    def loss(arm, s, lr, k):
        r = res.get((arm, s, lr, k))
        return r["valid_loss"] if r else None

    def mean(arm, s, lr):
        v = [loss(arm, s, lr, k) for k in seeds if loss(arm, s, lr, k) is not None]
        return statistics.fmean(v) if v and all(math.isfinite(x) for x in v) else (math.inf if v else None)

    table, verdicts = [], {x: [0, 0] for x in arms}  # arm -> [met, configurations]
    diverged_where_fixed_trains = {x: 0 for x in OTHERS}
    confusion = {"needs": 0, "not": 0}
    for s, lr in configs:
        means = {x: mean(x, s, lr) for x in arms}
        fixed = {x: means[x] for x in FIXED if means.get(x) is not None}
        best = min(fixed, key=fixed.get)
        worse_seeds = sum(w0_worse(loss, s, lr, k) for k in seeds)
        for k in seeds:
            trains = any(loss(x, s, lr, k) is not None and math.isfinite(loss(x, s, lr, k)) for x in FIXED)
            for x in OTHERS:
                v = loss(x, s, lr, k)
                if v is not None and not math.isfinite(v) and trains:
                    diverged_where_fixed_trains[x] += 1
        needs = needs_warmup(worse_seeds, len(seeds))
        confusion["needs" if needs else "not"] += 1
        line = {"scheme": s, "lr": lr, "tuned": best, "tuned_loss": fixed[best], "needs_warmup": int(needs),
                "seeds_worse_without": worse_seeds}
        for x in arms:
            if means[x] is None:
                continue
            line[x] = means[x]
            verdicts[x][1] += 1
            verdicts[x][0] += int(not worse(means[x], fixed[best]))
        ramps = [res[("auto", s, lr, k)].get("ramp_updates") for k in seeds if ("auto", s, lr, k) in res]
        line["auto_ramp"] = "/".join(str(v) for v in ramps)
        table.append(line)

    time_ratio, measure_share = [], []
    for r in rows:
        if r["arm"] != "auto" or r["wall_s"] is None:  # the default rule's cells
            continue
        fixed_walls = [res[(x, r["scheme"], r["lr"], r["seed"])]["wall_s"] for x in FIXED
                       if (x, r["scheme"], r["lr"], r["seed"]) in res and res[(x, r["scheme"], r["lr"], r["seed"])]["wall_s"]]
        if fixed_walls:
            time_ratio.append(r["wall_s"] / statistics.fmean(fixed_walls))
        measure_share.append(r.get("measure_s", 0.0) / r["wall_s"])

    out_csv = a.csv or os.path.join(a.run, "warmup_auto.csv")
    keys = ["arm", "scheme", "lr", "seed", "valid_loss", "diverged", "wall_s", "ramp_updates", "start_factor",
            "holds", "catapults", "measure_s"]
    text = io.StringIO()
    wr = csv.DictWriter(text, fieldnames=keys, extrasaction="ignore")
    wr.writeheader()
    for r in rows:
        wr.writerow({k: r.get(k, "") for k in keys})
    write_text(out_csv, text.getvalue())

    fmt = lambda v: "diverged" if v == math.inf else f"{v:.3f}"
    md = ["| scheme | lr | needs warm-up (seeds) | tuned | " + " | ".join(arms) + " | auto's ramp (updates) |",
          "|---|---:|---|---|" + "---:|" * len(arms) + "---|"]
    for t in table:
        cells_ = []
        for x in arms:
            v = t.get(x)
            if v is None:
                cells_.append("")
                continue
            mark = "" if not worse(v, t["tuned_loss"]) else " ✗"
            cells_.append(("**" + fmt(v) + "**" if x == t["tuned"] else fmt(v)) + mark)
        md.append(f"| {t['scheme']} | {t['lr']:g} | {'yes' if t['needs_warmup'] else 'no'} ({t['seeds_worse_without']}/"
                  f"{len(seeds)}) | {t['tuned']} | " + " | ".join(cells_) + f" | {t['auto_ramp']} |")
    md.append("")
    md.append("| arm | within the margin of the tuned warm-up | diverged in a seed where a fixed warm-up trains |")
    md.append("|---|---:|---:|")
    for x in arms:
        met, n = verdicts[x]
        md.append(f"| {x} | {met}/{n} ({100 * met / n:.0f}%) | {diverged_where_fixed_trains.get(x, '')} |")
    md.append("")
    md.append(f"Configurations that need warm-up: {confusion['needs']} of {confusion['needs'] + confusion['not']}.")
    met, cases = cross_seed_oracle(loss, configs, seeds)
    if cases:
        md.append(f"The fixed warm-up best in one seed, judged on the others (the aim's noise ceiling): within the "
                  f"margin in {met} of {cases} ({100 * met / cases:.0f}%).")
    rep = truth_replicate(loss, configs, seeds)
    if rep:
        md.append(replicate_line(rep))
    if time_ratio:
        md.append(f"auto's wall time / the fixed arms' (same configuration and seed): median "
                  f"{statistics.median(time_ratio):.3f}, max {max(time_ratio):.3f}; share spent measuring: median "
                  f"{100 * statistics.median(measure_share):.1f}%, max {100 * max(measure_share):.1f}%.")
    out_md = a.md or os.path.join(a.run, "warmup_auto.md")
    write_text(out_md, "\n".join(md) + "\n")
    print("\n".join(md))
    return 0


if __name__ == "__main__":
    sys.exit(main())
