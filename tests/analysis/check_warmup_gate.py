#!/usr/bin/env python3
"""scripts/warmup_gate.py on a grid small enough to score by hand (issue 37).

Two schemes (a: fitted, b: held out) x two lrs x 3 seeds. At lr 1 no warm-up is best (w0 3.0,
every ramp 3.5, auto 3.4); at lr 2 a ramp is needed (w0 5.0, w25 3.0, the other ramps 4.0, auto
3.0). The probe's loss drop is 0.2/0.3/0.4 (a, lr 1), 0.8/0.9/1.0 (a, lr 2), 0.5 x 3 (b, lr 1),
0.6/0.7/0.7 (b, lr 2); every other quantity is 1.0 everywhere (no threshold can be fitted).
Worked out by hand (margin max(0.02, 1%)):
- fitted on a: "> 0.6" (midway between 0.4 and 0.8) gets both of a's configurations; 0.25 and
  0.35 send a seed of (a, 1) to auto (mean 3.13 or 3.27 against 3.0), 0.85 a seed of (a, 2) to w0.
- held out: (b, 1) stays on w0 (0.5 < 0.6): within; (b, 2)'s seed 1 (0.6, not > 0.6) stays on w0:
  mean 3.67 against 3.0, outside. So 1 of 2 (0 of the one needing warm-up, 1 of the one needing none).
- never: the two lr-1 configurations; always: the two lr-2 ones; the oracle: all four.
- across grids (the same grid at 100 and at 200 updates), each left out in turn: plain, fitted on
  all four of the other: "> 0.55", 4/4 on either. "x updates": fitted at 100 updates "> 55" (4/4); at 200 updates the values double,
  so (a, 1)'s seeds 2-3 and all of (b, 1) go to auto: 2/4. Fitted at 200 updates "> 110" (4/4); at
  100 updates every seed of (a, 2) and (b, 2) is under it and stays on w0: 2/4.
- "/ log V" (only where every grid gives VOCAB): the same grid at 100 updates with V 100 and with V
  10,000 (log V twice as large: the scaled values halve): fitted on V 10,000 "> 0.55 / log 10,000"
  = 0.05972, which on V 100 sends (a, 1)'s seeds 2-3 and (b, 1) to auto: 2/4; fitted on V 100
  0.55 / log 100 = 0.1194, under which every seed of V 10,000 stays on w0: 2/4.
- the predictor across grids (per configuration the median drop: (a, 1) 0.3, (a, 2) 0.9, (b, 1)
  0.5, (b, 2) 0.7; lr 2 needs warm-up): plain, fitted on the other grid "> 0.6" (4 of 4 right;
  0.4 gets 3), TP 2, FP 0, FN 0, TN 2 on either grid left out: summed 4, 0, 0, 4. "x updates":
  fitted at 200 updates (60, 100, 140, 180) "> 120", at 100 updates (30, 50, 70, 90) nothing
  exceeds it: 0, 0, 2, 2; fitted at 100 updates "> 60", at 200 updates (a, 1)'s 60 is not above,
  (b, 1)'s 100 is: 2, 1, 0, 1; summed 2, 1, 2, 3: recall 2/4, precision 2/3.
- --threshold 0.75 (given): (a, 1) and (b, 1) stay on w0, (a, 2) goes to auto, (b, 2) (0.6-0.7)
  stays on w0 (5.0 against 3.0): fitted 2/2, held out 1/2 / 0 / 1, all 3/4 / 1 / 2; as a
  predictor (median above 0.75: (a, 2) only) 1, 0, 1, 2 on each grid, 2, 0, 2, 4 summed.
With six seeds the truth is two thirds of them (4 of 6, as 2 of 3): a configuration whose w0 is worse
(5.0 against w25's 3.0) in 3 of its 6 seeds does not need warm-up, one worse in 4 of 6 does.
The truth measured twice on it (the 10 splits of seeds 1-6 into two halves of 3, each half's truth
2 of its 3): lr 1 (worse in seeds 1-3) disagrees in every split (A = {1,2,3}: 3 against 0; A with
one of 4-6: 2 against 1; A = {1} + two of 4-6: 1 against 2), 7 + 3 positives; lr 2 (worse in
seeds 1-4) agrees where A holds one of 2-4 and one of 5-6 (6 splits, both yes), disagrees in the
3 with two of 2-4 (3 against 1) and in {1,5,6} (1 against 3), 9 + 7 positives. So 6 of 20 agree,
and one half's truth predicts the other's, both ways, with recall = precision = 2 x 6 / 26 = 0.46.
A predictor knowing each configuration's chance p (3/6 and 4/6) expects a half's truth (2 of 3) to
say yes with q = 3p^2(1-p) + p^3: 1/2 and 20/27. Saying yes where q >= 1/2 (both): recall
(1/2 + 20/27) / (1/2 + 20/27) = 1.00, precision (1/2 + 20/27) / 2 = 0.62; where q > 1/2 (lr 2
only): recall (20/27) / (67/54) = 0.60, precision 20/27 = 0.74.
scripts/warmup_depth.py on that six-seed grid: all six seeds, lr 1 no (3/6), lr 2 yes (4/6); seeds
1-3 only (--seeds 3), both yes (3/3); the drop 1.0 everywhere.
Then bad input: a missing arm row, a malformed UPDATES or VOCAB and a fifth value each end with one
line naming it."""
import argparse
import os
import subprocess
import sys

FEATURES = ["loss_drop", "grad_ratio", "ratio0", "ratioK", "attention_growth", "log_z", "update_ratio",
            "output_change"]
LOSS = {1: {"w0": 3.0, "w1": 3.5, "w5": 3.5, "w10": 3.5, "w25": 3.5, "auto": 3.4},
        2: {"w0": 5.0, "w1": 4.0, "w5": 4.0, "w10": 4.0, "w25": 3.0, "auto": 3.0}}
DROP = {("a", 1): [0.2, 0.3, 0.4], ("a", 2): [0.8, 0.9, 1.0], ("b", 1): [0.5, 0.5, 0.5], ("b", 2): [0.6, 0.7, 0.7]}

failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


def write_grid(d, skip_arm=None):
    arms = os.path.join(d, "arms.csv")
    probe = os.path.join(d, "probe.csv")
    with open(arms, "w") as f:
        f.write("arm,scheme,lr,seed,valid_loss,diverged,wall_s,ramp_updates,start_factor,holds,catapults,measure_s\n")
        for (s, lr), drops in DROP.items():
            for k in (1, 2, 3):
                for arm, v in LOSS[lr].items():
                    if (arm, s, lr, k) != skip_arm:
                        f.write(f"{arm},{s},{lr},{k},{v},0,1.0,,,,,\n")
    with open(probe, "w") as f:
        f.write("scheme,lr,seed,needs_warmup,seeds_worse_without," + ",".join(FEATURES) + "\n")
        for (s, lr), drops in DROP.items():
            for k, x in zip((1, 2, 3), drops):
                f.write(f"{s},{lr},{k},0,0,{x}," + ",".join("1.0" for _ in FEATURES[1:]) + "\n")
    return arms, probe


def write_six_seeds(d):
    """Scheme a at lr 1 (w0 worse in seeds 1-3 of 6) and lr 2 (in seeds 1-4 of 6)."""
    os.makedirs(d, exist_ok=True)
    arms, probe = os.path.join(d, "arms.csv"), os.path.join(d, "probe.csv")
    with open(arms, "w") as f:
        f.write("arm,scheme,lr,seed,valid_loss,diverged,wall_s,ramp_updates,start_factor,holds,catapults,measure_s\n")
        for lr, n_worse in ((1, 3), (2, 4)):
            for k in range(1, 7):
                for arm, v in LOSS[2].items():
                    v = 3.0 if arm == "w0" and k > n_worse else v
                    f.write(f"{arm},a,{lr},{k},{v},0,1.0,,,,,\n")
    with open(probe, "w") as f:
        f.write("scheme,lr,seed,needs_warmup,seeds_worse_without," + ",".join(FEATURES) + "\n")
        for lr in (1, 2):
            for k in range(1, 7):
                f.write(f"a,{lr},{k},0,0," + ",".join("1.0" for _ in FEATURES) + "\n")
    return arms, probe


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--scripts", required=True)
    p.add_argument("--workdir", required=True)
    a = p.parse_args()
    os.makedirs(a.workdir, exist_ok=True)
    script = os.path.join(a.scripts, "warmup_gate.py")
    arms, probe = write_grid(a.workdir)
    r = subprocess.run([sys.executable, script, "--grid", arms, probe, "100", "--grid", arms, probe, "200",
                        "--fit-schemes", "a", "--threshold", "0.75", "--md", os.path.join(a.workdir, "gate.md")], capture_output=True, text=True)
    check(r.returncode == 0, f"runs (exit {r.returncode}: {r.stderr.strip()[-300:]})")
    lines = r.stdout.splitlines()
    row = lambda first: [l for l in lines if l.startswith(f"| {first} |")]
    check(row("never (w0)")[:1] == ["| never (w0) | | 1/2 | 1/2 / 0 / 1 | 2/4 / 0 / 2 |"], "never: the lr-1 configurations")
    check(row("always (auto)")[:1] == ["| always (auto) | | 1/2 | 1/2 / 1 / 0 | 2/4 / 2 / 0 |"], "always: the lr-2 configurations")
    check(row("oracle (the truth)")[:1] == ["| oracle (the truth) | | 2/2 | 2/2 / 1 / 1 | 4/4 / 2 / 2 |"], "oracle: all four")
    check(row("loss_drop")[:1] == ["| loss_drop | > 0.6 | 2/2 | 1/2 / 0 / 1 | 3/4 / 1 / 2 |"],
          f"loss drop fitted on a at 0.6, held out 1 of 2: {row('loss_drop')[:1]}")
    check(not row("grad_ratio") or all("plain" in l or "x updates" in l for l in row("grad_ratio")),
          "a constant quantity gets no fitted row in the per-grid table")
    across = [l for l in row("loss_drop") if ("plain" in l or "x updates" in l) and "/4, " in l]
    check(across == ["| loss_drop | plain | > 0.55, 4/4, 4/4 | > 0.55, 4/4, 4/4 |",
                                   "| loss_drop | x updates | > 110, 4/4, 2/4 | > 55, 4/4, 2/4 |"],
          f"across grids: {across}")
    check(row("loss_drop > 0.75 (given)") == ["| loss_drop > 0.75 (given) | | 2/2 | 1/2 / 0 / 1 | 3/4 / 1 / 2 |"] * 2,
          f"the given gate on each grid: {row('loss_drop > 0.75 (given)')}")
    check(row("arms.csv") == ["| arms.csv | 1, 0, 1, 2 | 1/2 = 0.50 | 1/1 = 1.00 |"] * 2 and
          row("all") == ["| all | 2, 0, 2, 4 | 2/4 = 0.50 | 2/2 = 1.00 |"], f"the given gate as a predictor: {row('all')}")
    predicted = row("loss_drop")[-2:]
    check(predicted == ["| loss_drop | plain | 4, 0, 0, 4 | 4/4 = 1.00 | 4/4 = 1.00 | > 0.6: 2, 0, 0, 2 | > 0.6: 2, 0, 0, 2 |",
                        "| loss_drop | x updates | 2, 1, 2, 3 | 2/4 = 0.50 | 2/3 = 0.67 | > 120: 0, 0, 2, 2 | > 60: 2, 1, 0, 1 |"],
          f"the predictor across grids: {predicted}")
    check(open(os.path.join(a.workdir, "gate.md")).read() + "\n" == r.stdout, "--md holds what was printed")
    check("/ log V" not in r.stdout, "no '/ log V' form unless every grid gives its vocabulary")
    check("The truth measured twice" not in r.stdout, "no replicate of the truth with three seeds")
    r = subprocess.run([sys.executable, script, "--grid", arms, probe, "100", "100", "--grid", arms, probe, "100",
                        "10000", "--fit-schemes", "a"], capture_output=True, text=True)
    across = [l for l in r.stdout.splitlines() if l.startswith("| loss_drop | / log V |") and "/4, " in l]
    check(r.returncode == 0 and across == ["| loss_drop | / log V | > 0.05972, 4/4, 2/4 | > 0.1194, 4/4, 2/4 |"],
          f"across vocabularies: {across} {r.stderr.strip()[-300:]}")

    six = os.path.join(a.workdir, "six")
    arms6, probe6 = write_six_seeds(six)
    r = subprocess.run([sys.executable, script, "--grid", arms6, probe6, "100", "--fit-schemes", "a"],
                       capture_output=True, text=True)
    check(r.returncode == 0 and "(100 updates; 2 configurations, 1 need warm-up;" in r.stdout,
          f"six seeds: 4 of 6 worse needs warm-up, 3 of 6 does not: {r.stdout.splitlines()[:1]} {r.stderr.strip()}")
    replicate = [l for l in r.stdout.splitlines() if l.startswith("The truth measured twice")]
    check(replicate == ["The truth measured twice (the seeds in two halves, each of the 10 splits; each half's truth by "
                        "the same two-thirds rule): the halves agree on 6 of 20 configurations x splits (30%); one "
                        "half's truth as a prediction of the other's, both ways: recall = precision = 12/26 = 0.46. A "
                        "predictor that knew each configuration's chance of w0 being worse in a seed (its share of "
                        "these seeds) would expect against a half's truth recall 1.00 at precision 0.62 (saying yes "
                        "where that truth is at least as likely as not), or 0.60 at 0.74 (where it is likelier)."],
          f"the truth measured twice, six seeds: {replicate}")

    depth = os.path.join(a.scripts, "warmup_depth.py")
    r = subprocess.run([sys.executable, depth, f"six={arms6}:{probe6}", f"three={arms6}:{probe6}", "--seeds", "6"],
                       capture_output=True, text=True)
    rows6 = [l for l in r.stdout.splitlines() if l.startswith("| a |") or l.startswith("| all |")]
    check(rows6 == ["| a | 1 | no (3/6), 1.00 | no (3/6), 1.00 |", "| a | 2 | **yes** (4/6), 1.00 | **yes** (4/6), 1.00 |",
                    "| all | | 1 of 2 | 1 of 2 |"], f"warmup_depth.py, six seeds: {rows6} {r.stderr.strip()}")
    r = subprocess.run([sys.executable, depth, f"six={arms6}:{probe6}"], capture_output=True, text=True)
    rows3 = [l for l in r.stdout.splitlines() if l.startswith("| a |")]
    check(rows3 == ["| a | 1 | **yes** (3/3), 1.00 |", "| a | 2 | **yes** (3/3), 1.00 |"],
          f"warmup_depth.py, seeds 1-3: {rows3} {r.stderr.strip()}")
    r = subprocess.run([sys.executable, depth, f"six={arms6}"], capture_output=True, text=True)
    check(r.returncode != 0 and r.stderr.strip() == f"warmup_depth.py: six={arms6}: give LABEL=ARMS.csv:PROBE.csv",
          f"warmup_depth.py, a bad grid named: {r.stderr.strip()}")

    bad = os.path.join(a.workdir, "bad")
    os.makedirs(bad, exist_ok=True)
    arms_b, probe_b = write_grid(bad, skip_arm=("auto", "b", 2, 3))
    r = subprocess.run([sys.executable, script, "--grid", arms_b, probe_b, "100"], capture_output=True, text=True)
    check(r.returncode != 0 and r.stderr.strip() == f"warmup_gate.py: {arms_b}: no auto row for b lr 2 seed 3",
          f"a missing row named: {r.stderr.strip()}")
    r = subprocess.run([sys.executable, script, "--grid", arms, probe, "ten"], capture_output=True, text=True)
    check(r.returncode != 0 and len(r.stderr.strip().splitlines()) == 1 and "UPDATES must be an integer above 1" in r.stderr,
          f"a bad UPDATES named: {r.stderr.strip()}")
    r = subprocess.run([sys.executable, script, "--grid", arms, probe, "100", "1"], capture_output=True, text=True)
    check(r.returncode != 0 and len(r.stderr.strip().splitlines()) == 1 and "VOCAB must be an integer above 1" in r.stderr,
          f"a bad VOCAB named: {r.stderr.strip()}")
    r = subprocess.run([sys.executable, script, "--grid", arms, probe, "100", "500", "9"], capture_output=True, text=True)
    check(r.returncode != 0 and len(r.stderr.strip().splitlines()) == 1 and "ARMS.csv PROBE.csv UPDATES [VOCAB]" in r.stderr,
          f"a fifth value named: {r.stderr.strip()}")
    print(f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
