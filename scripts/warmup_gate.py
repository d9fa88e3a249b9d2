#!/usr/bin/env python3
"""The 2% probe as a gate (issue 37): no warm-up unless the probe says so, then a ramp.

    python3 scripts/warmup_gate.py --grid ARMS.csv PROBE.csv UPDATES [VOCAB] [--grid ...] [--arm auto]
                                   [--fit-schemes post-ln,pre-ln,admin,t-fixup] [--threshold G] [--md FILE]

ARMS.csv is what scripts/warmup_auto.py keeps (docs/data/warmup_auto/synthetic-*.csv: every arm's
final validation loss per configuration and seed), PROBE.csv what scripts/warmup_predictor.py
keeps (the probe's quantities per seed: the first 2% of the w0 run), UPDATES the grid's planned
updates, VOCAB (optional) its vocabulary size. Nothing is trained: the gated arm of a seed is that seed's w0 result when its probe
quantity is on the "no" side of the threshold, and ARM's result (the same seed, a fresh run from
the same initialisation) when it is on the "yes" side. So the gate costs the probe's 2% only where
it chooses the ramp (the probe is then thrown away and the run restarts with ARM).

Scored as scripts/warmup_auto.py scores an arm (one definition of the margin, the tuned warm-up
and the truth): per configuration the gated arm's mean over the seeds, within the margin of the
best fixed warm-up (w0 ... w25) or not. For each probe quantity the threshold and side with the
most configurations within the margin are chosen:
  - per grid: fitted on the --fit-schemes, applied unchanged to the other schemes;
  - across grids (with several --grid): each grid left out in turn, the threshold fitted on every
    configuration of the others and applied to it, the quantity as measured ("plain") and
    multiplied by the grid's planned updates ("x updates": a threshold that scales as 1/length),
    and where every grid gives VOCAB, divided by log VOCAB ("/ log V": a threshold in units of the
    uniform model's loss, the initial loss of a model whose outputs start near uniform).
--threshold G adds the gate "loss drop > G" as given (a G fitted elsewhere, e.g. the recipe's
0.646) to each grid's table, and as a predictor: its confusion table per grid.
The oracle gate (ARM exactly where the truth says warm-up is needed) and the cross-seed noise
ceiling (warmup_auto.py's) bound what any gate can reach.

With several --grid, the predictor of issue 37 §1 is also scored across grids: each grid left out,
each quantity (per configuration, its median over the seeds, as scripts/warmup_predictor.py) given
the threshold and side with the most right answers on every configuration of the other grids, its
confusion table on the grid left out, and the sums over the grids left out (recall and precision
on configurations no threshold was fitted on)."""
import argparse
import math
import statistics
import sys
import os

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from atomic_write import write_text  # noqa: E402
from warmup_auto import (FIXED, cross_seed_oracle, needs_warmup, read_kept, replicate_line, truth_replicate,  # noqa: E402
                         w0_worse, worse)
from warmup_predictor import FEATURES, confusion, rate  # noqa: E402
from warmup_predictor import fit as fit_predictor  # noqa: E402


class Grid:
    def __init__(self, arms_csv, probe_csv, updates, vocab, arm):
        self.name = os.path.basename(arms_csv)
        self.updates = updates
        self.vocab = vocab  # None: not given
        self.loss = {}  # (arm, scheme, lr, seed) -> final validation loss (inf: diverged)
        for r in read_kept(arms_csv):
            self.loss[(r["arm"], r["scheme"], r["lr"], r["seed"])] = (
                math.inf if r.get("diverged") else r["valid_loss"])
        self.probe = {}  # (scheme, lr, seed) -> {quantity: value}
        for line, r in enumerate(read_csv(probe_csv), start=2):
            try:
                self.probe[(r["scheme"], float(r["lr"]), int(r["seed"]))] = {f: float(r[f]) for f in FEATURES}
            except (KeyError, ValueError) as e:
                sys.exit(f"warmup_gate.py: {probe_csv}:{line}: not a row of warmup_predictor.py's csv ({e})")
        self.configs = sorted({(s, lr) for (x, s, lr, k) in self.loss if x == "w0"})
        self.seeds = {c: sorted(k for (x, s, lr, k) in self.loss if x == "w0" and (s, lr) == c) for c in self.configs}
        for c in self.configs:
            for k in self.seeds[c]:
                for x in FIXED + [arm]:
                    if (x,) + c + (k,) not in self.loss:
                        sys.exit(f"warmup_gate.py: {arms_csv}: no {x} row for {c[0]} lr {c[1]:g} seed {k}")
                if c + (k,) not in self.probe:
                    sys.exit(f"warmup_gate.py: {probe_csv}: no probe row for {c[0]} lr {c[1]:g} seed {k}")

    def tuned(self, c):
        return min(self.mean(c, lambda k, x=x: self.loss[(x,) + c + (k,)]) for x in FIXED)

    def mean(self, c, pick):
        return statistics.fmean(pick(k) for k in self.seeds[c])

    def median(self, c, feature):
        """The probe quantity's median over the configuration's seeds (scripts/warmup_predictor.py's
        per-configuration value)."""
        return statistics.median(self.probe[c + (k,)][feature] for k in self.seeds[c])

    def lookup(self, x, s, lr, k):
        """The final loss of arm x (None: no such cell), as warmup_auto.py's functions read it."""
        return self.loss.get((x, s, lr, k))

    def worse_seeds(self, c):
        """In how many seeds w0 ends worse than the best of w1..w25."""
        return sum(w0_worse(self.lookup, *c, k) for k in self.seeds[c])

    def needs(self, c):
        return needs_warmup(self.worse_seeds(c), len(self.seeds[c]))

    def met(self, configs, arm, gate):
        """(configurations within the margin, of them needing warm-up, of them needing none)."""
        out = [0, 0, 0]
        for c in configs:
            ok = not worse(self.mean(c, lambda k: self.loss[(arm if gate(c, k) else "w0",) + c + (k,)]), self.tuned(c))
            out[0] += ok
            out[1 if self.needs(c) else 2] += ok
        return tuple(out)


def read_csv(path):
    import csv
    if not os.path.isfile(path):
        sys.exit(f"warmup_gate.py: {path}: no such file")
    return list(csv.DictReader(open(path)))


def threshold_gate(grid, feature, threshold, above, scale=1.0):
    def gate(c, k):
        v = grid.probe[c + (k,)][feature] * scale
        return v > threshold if above else v < threshold
    return gate


def fit(parts, arm, feature, scale=lambda g: 1.0):
    """The threshold (midway between two measured values) and side with the most configurations
    within the margin over `parts`, a list of (grid, its configurations); each quantity times
    scale(its grid). Ties keep the first (lowest threshold, 'above' before 'below').

    A configuration's verdict changes only where the threshold crosses one of its own seeds'
    values, so each configuration is scored once per stretch between them and the stretches are
    summed over every threshold by their starts (a sweep, instead of scoring every configuration
    at every threshold)."""
    values = sorted({g.probe[c + (k,)][feature] * scale(g) for g, configs in parts for c in configs for k in g.seeds[c]
                     if math.isfinite(g.probe[c + (k,)][feature])})
    if len(values) < 2:
        return None
    position = {v: i for i, v in enumerate(values)}
    count = {True: [0] * (len(values) - 1), False: [0] * (len(values) - 1)}  # changes, by threshold index
    for g, configs in parts:
        for c in configs:
            v = {k: g.probe[c + (k,)][feature] * scale(g) for k in g.seeds[c]}
            own = sorted({x for x in v.values() if math.isfinite(x)})
            # one threshold inside each stretch: below all of own, between neighbours, above all
            inside = [own[0] - 1, *((a + b) / 2 for a, b in zip(own, own[1:])), own[-1] + 1] if own else [0.0]
            for above in (True, False):
                met = [g.met([c], arm, lambda _, k, t=t: v[k] > t if above else v[k] < t)[0] for t in inside]
                changes = count[above]
                changes[0] += met[0]
                for j, u in enumerate(own):
                    if position[u] < len(changes):  # thresholds from index position[u] on lie above u
                        changes[position[u]] += met[j + 1] - met[j]
    best = None
    n = {True: 0, False: 0}
    for i, (lo, hi) in enumerate(zip(values, values[1:])):
        for above in (True, False):
            n[above] += count[above][i]
            if best is None or n[above] > best[0]:
                best = (n[above], (lo + hi) / 2, above)
    return best


def frac(t):
    return f"{t[1]}/{t[0]}"


def grid_tables(g, arm, fit_schemes, given=None):
    fitted = [c for c in g.configs if c[0] in fit_schemes]
    held = [c for c in g.configs if c[0] not in fit_schemes]
    n_needs = sum(g.needs(c) for c in g.configs)
    seeds = sorted({k for c in g.configs for k in g.seeds[c]})
    ceiling = cross_seed_oracle(g.lookup, g.configs, seeds)
    replicate = truth_replicate(g.lookup, g.configs, seeds)
    never, always = (lambda c, k: False), (lambda c, k: True)
    oracle = lambda c, k: g.needs(c)
    md = [f"**{g.name}** ({g.updates} updates; {len(g.configs)} configurations, {n_needs} need warm-up; "
          f"gate: w0, or {arm}): within the margin, all / needing warm-up / needing none",
          "",
          "| gate | threshold | fitted: all | held out: all / needs / needs none | every configuration: all / needs / needs none |",
          "|---|---|---:|---|---|"]
    named = [("never (w0)", never), (f"always ({arm})", always), ("oracle (the truth)", oracle)]
    if given is not None:
        named.append((f"loss_drop > {given:g} (given)", threshold_gate(g, "loss_drop", given, True)))
    for name, gate in named:
        h, a = g.met(held, arm, gate), g.met(g.configs, arm, gate)
        md.append(f"| {name} | | {g.met(fitted, arm, gate)[0]}/{len(fitted)} | {h[0]}/{len(held)} / {h[1]} / {h[2]} | "
                  f"{a[0]}/{len(g.configs)} / {a[1]} / {a[2]} |")
    for f in FEATURES:
        best = fit([(g, fitted)], arm, f)
        if best is None:
            continue
        n, t, above = best
        gate = threshold_gate(g, f, t, above)
        h, a = g.met(held, arm, gate), g.met(g.configs, arm, gate)
        md.append(f"| {f} | {'>' if above else '<'} {t:.4g} | {n}/{len(fitted)} | {h[0]}/{len(held)} / {h[1]} / {h[2]} | "
                  f"{a[0]}/{len(g.configs)} / {a[1]} / {a[2]} |")
    md += ["", f"Noise ceiling (warmup_auto.py's cross-seed oracle over fixed warm-ups): {ceiling[0]}/{ceiling[1]} "
           f"cases."] + ([replicate_line(replicate)] if replicate else []) + [""]
    return md


def transfer_table(grids, arm):
    """Leave one grid out: each quantity fitted on every configuration of the other grids, applied
    unchanged to the one left out, as measured, times the planned updates and (where every grid
    gives its vocabulary) over log V."""
    forms = scale_forms(grids)
    md = ["Across grids: fitted on every configuration of the other grids, applied unchanged to the one left out "
          f"({'; '.join(f'{g.name}: {g.updates} updates' for g in grids)})", "",
          "| quantity | form | " + " | ".join(f"{g.name} left out: threshold, fitted, there" for g in grids) + " |",
          "|---|---|" + "---|" * len(grids)]
    for f in FEATURES:
        for form, scale in forms:
            cells = []
            for out in grids:
                others = [(g, g.configs) for g in grids if g is not out]
                best = fit(others, arm, f, scale)
                if best is None:
                    cells.append("")
                    continue
                n, t, above = best
                m = out.met(out.configs, arm, threshold_gate(out, f, t, above, scale(out)))[0]
                cells.append(f"{'>' if above else '<'} {t:.4g}, {n}/{sum(len(c) for _, c in others)}, "
                             f"{m}/{len(out.configs)}")
            md.append(f"| {f} | {form} | " + " | ".join(cells) + " |")
    return md + [""]


def scale_forms(grids):
    """The forms a threshold is carried across grids in: as measured, times the planned updates, and
    (where every grid gives its vocabulary) over log V."""
    forms = [("plain", lambda g: 1.0), ("x updates", lambda g: g.updates)]
    if all(g.vocab for g in grids):
        forms.append(("/ log V", lambda g: 1.0 / math.log(g.vocab)))
    return forms


def prediction_table(grids):
    """Issue 37 §1's predictor, each grid left out: the configuration's median quantity over its
    seeds (times the form's scale) against the truth, the threshold fitted on the other grids."""
    keys = [(i, c) for i, g in enumerate(grids) for c in g.configs]
    truth = {(i, c): grids[i].needs(c) for i, c in keys}
    md = ["Predicting the need for warm-up across grids (issue 37 §1): each grid left out, the threshold with the most "
          "right answers on the configurations of the others (median over seeds), its confusion table there "
          "(TP, FP, FN, TN; positive: needs warm-up); "
          f"{sum(truth.values())} of {len(keys)} configurations need warm-up", "",
          "| quantity | form | held out, summed: TP, FP, FN, TN | recall | precision | " +
          " | ".join(f"{g.name} left out" for g in grids) + " |",
          "|---|---|---|---|---|" + "---|" * len(grids)]
    for f in FEATURES:
        for form, scale in scale_forms(grids):
            values = {(i, c): grids[i].median(c, f) * scale(grids[i]) for i, c in keys}
            total, cells = [0, 0, 0, 0], []
            for out in range(len(grids)):
                best = fit_predictor([key for key in keys if key[0] != out], values, truth)
                if best is None:
                    cells.append("")
                    continue
                _, t, above = best
                counts = confusion([key for key in keys if key[0] == out], values, truth, t, above)
                total = [x + y for x, y in zip(total, counts)]
                cells.append(f"{'>' if above else '<'} {t:.4g}: {', '.join(map(str, counts))}")
            tp, fp, fn, tn = total
            md.append(f"| {f} | {form} | {tp}, {fp}, {fn}, {tn} | {rate(tp, tp + fn)} | {rate(tp, tp + fp)} | " +
                      " | ".join(cells) + " |")
    return md + [""]


def given_table(grids, given):
    """The gate --threshold G (loss drop > G) as issue 37 §1's predictor, nothing fitted: a
    configuration is predicted to need warm-up when its median drop over the seeds exceeds G."""
    md = [f"The given gate (loss drop > {given:g}, fitted on none of these grids) as a predictor: TP, FP, FN, TN "
          "(positive: needs warm-up; predicted: the median drop over the seeds above G)", "",
          "| grid | TP, FP, FN, TN | recall | precision |", "|---|---|---|---|"]
    total = [0, 0, 0, 0]
    for g in grids:
        values = {c: g.median(c, "loss_drop") for c in g.configs}
        counts = confusion(g.configs, values, {c: g.needs(c) for c in g.configs}, given, True)
        total = [x + y for x, y in zip(total, counts)]
        md.append(f"| {g.name} | {', '.join(map(str, counts))} | {rate(counts[0], counts[0] + counts[2])} | "
                  f"{rate(counts[0], counts[0] + counts[1])} |")
    tp, fp, fn, tn = total
    md.append(f"| all | {tp}, {fp}, {fn}, {tn} | {rate(tp, tp + fn)} | {rate(tp, tp + fp)} |")
    return md + [""]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--grid", nargs="+", action="append", required=True,
                   metavar="ARMS.csv PROBE.csv UPDATES [VOCAB]")
    p.add_argument("--arm", default="auto")
    p.add_argument("--fit-schemes", default="post-ln,pre-ln,admin,t-fixup")
    p.add_argument("--threshold", type=float, metavar="G",
                   help="also score the gate 'loss drop > G' as given (fitted on nothing here)")
    p.add_argument("--md")
    a = p.parse_args()
    grids = []
    for given in a.grid:
        if len(given) not in (3, 4):
            sys.exit(f"warmup_gate.py: --grid {' '.join(given)}: give ARMS.csv PROBE.csv UPDATES [VOCAB]")
        arms_csv, probe_csv, *counts = given
        sizes = []
        for what, text in zip(("UPDATES", "VOCAB"), counts):
            try:
                n = int(text)
                if n <= 1:
                    raise ValueError
            except ValueError:
                sys.exit(f"warmup_gate.py: --grid {' '.join(given)}: {what} must be an integer above 1")
            sizes.append(n)
        grids.append(Grid(arms_csv, probe_csv, sizes[0], sizes[1] if len(sizes) > 1 else None, a.arm))
    md = []
    for g in grids:
        md += grid_tables(g, a.arm, set(a.fit_schemes.split(",")), a.threshold)
    if a.threshold is not None:
        md += given_table(grids, a.threshold)
    if len(grids) > 1:
        md += transfer_table(grids, a.arm) + prediction_table(grids)
    text = "\n".join(md)
    if a.md:
        write_text(a.md, text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
