#!/usr/bin/env python3
"""`normlab train --warmup auto` (issue 37 §2) on Multi30k val with a tiny model:
- the ramp's first factor is min(1, T / (lambda_0 lr)) with T = (2 + 2 beta1)/(1 - beta1) = 38 for
  beta1 0.9, computed here from the record's lambda_0; that lambda_0 is the curvature series'
  lambda_1(P^-1 H) at update 0 (`--curvature-every`, the same probe set, both Lanczos runs long
  enough to converge: an independent wiring of the same quantity);
- every update's lr in metrics.jsonl (log interval 1) is the target times the factor that the
  records' decisions imply (f_{n+1} = min(1, f_n x growth) between decisions), the ramp ends at
  the target rate, and after it the rate is the schedule's;
- a run killed (SIGKILL) after update 10's checkpoint and resumed writes the same warmup.jsonl and
  the same losses and rates, bit for bit, as an uninterrupted run;
- `--warmup-auto-every-ratio 0.125` of 40 updates measures (and doubles) every 5 updates;
- config.json says "warmup": "auto" only for such a run (a fixed run's file has no key), and a
  fixed run's folder is not resumed with --warmup auto;
- bad combinations are refused in one line naming the option."""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import cli_setup  # noqa: E402

T_ADAM = (2 + 2 * 0.9) / (1 - 0.9)  # Cohen et al. 2022's threshold x lr at beta1 = 0.9


def main():
    args, prefix, w = cli_setup.parse_and_prepare()
    check = cli_setup.Checks()
    lr = 3e-3

    def argv(out, *more):
        return cli_setup.tiny_train(args.normlab, prefix, out, "--max-tokens", 1000, "--dropout", 0.1, "--lr", lr,
                                    "--optimizer", "adam", "--betas", "0.9,0.98", "--lr-schedule", "constant",
                                    "--max-steps", 40, "--log-interval", 1, "--save-interval-updates", 10,
                                    "--warmup", "auto", "--warmup-auto-every-ratio", 0.125, "--warmup-auto-sentences", 24,
                                    "--warmup-auto-lanczos-steps", 30, *more)

    def jsonl(path):
        return [json.loads(l) for l in open(path)]

    def updates(out):
        return [r for r in jsonl(os.path.join(out, "metrics.jsonl")) if "grad_norm" in r]

    straight = w("straight")
    r = subprocess.run(argv(straight), capture_output=True, text=True)
    check(r.returncode == 0, f"run failed: {r.stderr[-600:]}")
    recs = jsonl(os.path.join(straight, "warmup.jsonl"))
    first = recs[0]
    check(first["step"] == 0 and first["decision"] in ("start", "done"), f"first record: {first}")
    check(first["every"] == 5, f"--warmup-auto-every-ratio 0.125 of 40 updates is every 5: {first}")
    expected = min(1.0, T_ADAM / (first["preconditioned_lambda_max"] * lr))
    check(abs(first["factor"] - expected) < 1e-12 * expected, f"start factor {first['factor']} vs {expected}")
    check(first["decision"] == "done" or abs(first["growth"] - 2 ** (1 / 5)) < 1e-12, f"start growth: {first}")

    # The same lambda_0 from the curvature series (update 0, P of the first step: `next`).
    curv = w("curvature")
    cmd = argv(curv, "--curvature-every", 1000, "--curvature-sentences", 24, "--curvature-steps", 30)
    cmd[cmd.index("--max-steps") + 1] = "1"
    r = subprocess.run(cmd, capture_output=True, text=True)
    check(r.returncode == 0, f"curvature run failed: {r.stderr[-600:]}")
    if r.returncode == 0:
        c0 = jsonl(os.path.join(curv, "curvature.jsonl"))[0]
        lam, ref = first["preconditioned_lambda_max"], c0["preconditioned_lambda_max"]
        check(abs(lam - ref) < 1e-3 * ref, f"lambda_0 {lam} vs the curvature series' {ref}")
        check(abs(c0["lr"] - lr * first["factor"]) < 1e-15, f"the series reads the chosen rate: {c0['lr']}")

    # Every update's rate from the decisions.
    by_step = {x["step"]: x for x in recs}
    factor, growth, done = first["factor"], first["growth"], first["decision"] == "done"
    ups = updates(straight)
    check(len(ups) == 40, f"40 update records, got {len(ups)}")
    for u in ups:
        want = lr * (1.0 if done else factor)
        check(abs(u["lr"] - want) < 1e-12 * want, f"update {u['step']}: lr {u['lr']} vs {want}")
        if done:
            continue
        d = by_step.get(u["step"])
        if d is not None:
            factor, growth, done = d["factor"], d["growth"], d["decision"] == "done"
        else:
            factor = min(1.0, factor * growth)
            done = factor >= 1.0
    last = recs[-1]
    check(last["decision"] == "done" and last["factor"] == 1.0, f"the ramp ends at the target: {last}")
    for x in recs[1:]:
        check(x["decision"] in ("grow", "hold", "catapult", "deadline", "done"), f"decision {x}")
        if "preconditioned_lambda_max" in x:
            check(x["step"] % 5 == 0, f"measured every 5 updates: {x}")

    # Killed after update 10's checkpoint, resumed: the same records, losses and rates.
    killed = w("killed")
    cli_setup.kill_when(argv(killed), os.path.join(killed, "checkpoints", "checkpoint_1_10.pt"))
    r = subprocess.run(argv(killed), capture_output=True, text=True)
    check(r.returncode == 0 and "resuming at update" in r.stderr, f"resume failed: {r.stderr[-600:]}")
    strip = lambda rs: [{k: v for k, v in x.items() if k != "seconds"} for x in rs]
    check(strip(jsonl(os.path.join(killed, "warmup.jsonl"))) == strip(recs), "the resumed ramp differs")
    keep = lambda rs: [(x["step"], x["lr"], x["loss"], x["grad_norm"]) for x in rs]
    check(keep(updates(killed)) == keep(ups), "the resumed losses or rates differ")

    # config.json: "warmup" only for auto; a fixed run is not resumed as auto.
    conf = json.load(open(os.path.join(straight, "config.json")))
    check(conf["schedule"].get("warmup") == "auto" and conf["schedule"]["warmup_auto"]["every"] == 0 and
          conf["schedule"]["warmup_auto"]["every_ratio"] == 0.125,
          f"config.json schedule: {conf['schedule']}")
    fixed = w("fixed")
    plain = cli_setup.tiny_train(args.normlab, prefix, fixed, "--max-tokens", 1000, "--lr", lr, "--lr-schedule", "constant",
                                 "--warmup-steps", 4, "--max-steps", 2)
    r = subprocess.run(plain, capture_output=True, text=True)
    check(r.returncode == 0, f"fixed run failed: {r.stderr[-400:]}")
    if r.returncode == 0:
        s = json.load(open(os.path.join(fixed, "config.json")))["schedule"]
        check("warmup" not in s and "warmup_auto" not in s, f"a fixed run's schedule: {s}")
        more = [a for a in plain if a != plain[plain.index("--warmup-steps") + 1] and a != "--warmup-steps"]
        more[more.index("--max-steps") + 1] = "4"
        r = subprocess.run(more + ["--warmup", "auto"], capture_output=True, text=True)
        check(r.returncode != 0 and "schedule.warmup" in r.stderr, f"fixed run resumed as auto: {r.stderr[-400:]}")

    # Refusals, one line each naming the option.
    for extra, needle in ((["--warmup-steps", "10"], "--warmup-steps"),
                          (["--optimizer", "lion"], "--optimizer lion"),
                          (["--lr-schedule", "inverse-sqrt"], "inverse-sqrt")):
        cmd = argv(w("bad" + extra[0]))
        if extra[0] in cmd:
            cmd[cmd.index(extra[0]) + 1] = extra[1]
        else:
            cmd += extra
        r = subprocess.run(cmd, capture_output=True, text=True)
        check(r.returncode != 0 and needle in r.stderr and "--warmup auto" in r.stderr,
              f"{extra}: rc {r.returncode}: {r.stderr[-300:]}")
    cmd = cli_setup.tiny_train(args.normlab, prefix, w("bad-every"), "--max-steps", 2, "--warmup-auto-every", 3)
    r = subprocess.run(cmd, capture_output=True, text=True)
    check(r.returncode != 0 and "--warmup auto" in r.stderr, f"--warmup-auto-every alone: {r.stderr[-300:]}")
    cmd = argv(w("bad-ratio"))
    cmd[cmd.index("--warmup-auto-every-ratio") + 1] = "0"
    r = subprocess.run(cmd, capture_output=True, text=True)
    check(r.returncode != 0 and "--warmup-auto-every-ratio" in r.stderr and len(r.stderr.strip().splitlines()) == 1,
          f"--warmup-auto-every-ratio 0: rc {r.returncode}: {r.stderr[-300:]}")
    return check.finish()


if __name__ == "__main__":
    sys.exit(main())
