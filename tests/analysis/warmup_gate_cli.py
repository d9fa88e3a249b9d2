#!/usr/bin/env python3
"""`normlab train --warmup-gate G` (issue 37) on Multi30k val with a tiny model:
- the probe (RUN_DIR/probe) is 2 updates (2% of 100, at least 2) at the target rate, and gate.json's
  loss drop is its update-1 training loss minus its update-2 loss, read here from its metrics.jsonl;
- a gate above the drop trains without warm-up: every update record (step, lr, loss, grad_norm)
  equal, bit for bit, to a separate `--warmup-steps 0` run's, and config.json without "warmup";
- a gate below the drop ramps: warmup.jsonl and every update record equal to a `--warmup auto` run
  without a gate; with `--warmup-steps 10` instead, every update record equal to that fixed run's;
- a run killed after update 10's checkpoint and resumed gives the same records, without probing again;
  re-running a finished run leaves gate.json and the probe as they were;
- `--warmup-gate-only` prints the decision ("warm-up: needed" / "not needed", the warm-up it would
  train with, the loss drop against G) and trains nothing (RUN_DIR holds gate.json and the probe
  only); the same command without it then trains with that decision, its updates equal to the
  direct gated run's; `normlab advise --warmup-gate G` with the same training options prints the
  same advice and writes the same gate.json and probe records; --warmup-gate-only without
  --warmup-gate is refused in one line;
- a different gate on a decided folder, a gate.json that is not JSON, a gate without a warm-up to
  gate, without --max-steps, with inverse-sqrt, and a negative one are refused in one line naming
  the file or option."""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import cli_setup  # noqa: E402


def main():
    args, prefix, w = cli_setup.parse_and_prepare()
    check = cli_setup.Checks()
    lr = 1e-2

    def argv(out, *more):
        return cli_setup.tiny_train(args.normlab, prefix, out, "--max-tokens", 1000, "--dropout", 0.1, "--lr", lr,
                                    "--optimizer", "adam", "--betas", "0.9,0.98", "--lr-schedule", "constant",
                                    "--max-steps", 100, "--log-interval", 1, "--save-interval-updates", 10, *more)

    def auto(out, *more):
        return argv(out, "--warmup", "auto", "--warmup-auto-sentences", 8, *more)

    def jsonl(path):
        return [json.loads(l) for l in open(path)]

    def updates(out):
        return [(r["step"], r["lr"], r["loss"], r["grad_norm"])
                for r in jsonl(os.path.join(out, "metrics.jsonl")) if "grad_norm" in r]

    def run(cmd, what):
        r = subprocess.run(cmd, capture_output=True, text=True)
        check(r.returncode == 0, f"{what}: rc {r.returncode}: {r.stderr[-600:]}")
        return r

    # No warm-up: a gate far above any drop.
    none, plain = w("none"), w("plain")
    run(auto(none, "--warmup-gate", 50), "gated run (none)")
    run(argv(plain, "--warmup-steps", 0), "run without warm-up")
    gate = json.load(open(os.path.join(none, "gate.json")))
    probe = [r for r in jsonl(os.path.join(none, "probe", "metrics.jsonl")) if "grad_norm" in r]
    check([r["step"] for r in probe] == [1, 2] and all(r["lr"] == lr for r in probe),
          f"the probe: 2 updates at the target rate: {[(r['step'], r['lr']) for r in probe]}")
    check(gate["probe_updates"] == 2 and gate["loss_drop"] == probe[0]["loss"] - probe[1]["loss"] and
          gate["threshold"] == 50 and gate["decision"] == "none", f"gate.json: {gate}")
    check(updates(none) == updates(plain) and len(updates(plain)) == 100,
          "the gated run without warm-up differs from --warmup-steps 0")
    schedule = json.load(open(os.path.join(none, "config.json")))["schedule"]
    check("warmup" not in schedule and schedule["warmup_steps"] == 0, f"config.json: {schedule}")

    # Re-run when finished: no new probe, nothing rewritten.
    before = {p: os.stat(os.path.join(none, p)).st_mtime_ns for p in ("gate.json", "probe/metrics.jsonl")}
    run(auto(none, "--warmup-gate", 50), "finished run re-run")
    check(before == {p: os.stat(os.path.join(none, p)).st_mtime_ns for p in before}, "the re-run probed again")

    # The ramp: a gate below the drop.
    ramp, straight = w("ramp"), w("auto")
    threshold = gate["loss_drop"] / 2
    check(threshold > 0, f"the loss fell over the probe ({gate['loss_drop']}): the ramp case needs it")
    run(auto(ramp, "--warmup-gate", threshold), "gated run (ramp)")
    run(auto(straight), "--warmup auto without a gate")
    strip = lambda rs: [{k: v for k, v in x.items() if k != "seconds"} for x in rs]
    check(json.load(open(os.path.join(ramp, "gate.json")))["decision"] == "ramp", "decision ramp")
    check(strip(jsonl(os.path.join(ramp, "warmup.jsonl"))) == strip(jsonl(os.path.join(straight, "warmup.jsonl"))),
          "the gated ramp differs from --warmup auto's")
    check(updates(ramp) == updates(straight), "the gated ramp's updates differ from --warmup auto's")
    check(json.load(open(os.path.join(ramp, "config.json")))["schedule"]["warmup_gate"] == threshold,
          "config.json records the gate")

    # A fixed warm-up behind the gate: the run of --warmup-steps 10 itself.
    fixed_gated, fixed = w("fixed-gated"), w("fixed")
    run(argv(fixed_gated, "--warmup-steps", 10, "--warmup-gate", threshold), "gated fixed warm-up")
    run(argv(fixed, "--warmup-steps", 10), "fixed warm-up")
    check(json.load(open(os.path.join(fixed_gated, "gate.json")))["decision"] == "ramp" and
          updates(fixed_gated) == updates(fixed) and updates(fixed)[0][1] < lr,
          "the gated fixed warm-up differs from --warmup-steps 10")

    # Advice first (--warmup-gate-only), then the same command trains with it.
    for name, g, needed, reference in (("advice-ramp", threshold, True, straight), ("advice-none", 50, False, plain)):
        advice = w(name)
        r = run(auto(advice, "--warmup-gate", g, "--warmup-gate-only"), f"{name}: --warmup-gate-only")
        lines = r.stdout.splitlines()
        drop = json.load(open(os.path.join(advice, "gate.json")))["loss_drop"]
        check(len(lines) == 4 and lines[0].startswith("warm-up: needed" if needed else "warm-up: not needed") and
              f"{drop:f} nats over the 2-update probe" in lines[0] and
              lines[1] == ("train with: --warmup auto (its ramp, chosen while training; docs/warmup.md)"
                           if needed else "train with: no warm-up"), f"{name}: the advice: {lines}")
        check(sorted(os.listdir(advice)) == ["gate.json", "probe"], f"{name}: trained: {sorted(os.listdir(advice))}")
        run(auto(advice, "--warmup-gate", g), f"{name}: the same command without --warmup-gate-only")
        check(updates(advice) == updates(reference), f"{name}: the run after the advice differs from the gated run's")
        if needed:  # `normlab advise --warmup-gate G` with the training options: the same advice
            by_advise = w(name + "-advise")
            cmd = auto(by_advise, "--warmup-gate", g)
            cmd[cmd.index("train")] = "advise"
            ra = run(cmd, f"{name}: normlab advise --warmup-gate")
            same = lambda d: (json.load(open(os.path.join(d, "gate.json"))),
                              [x for x in jsonl(os.path.join(d, "probe", "metrics.jsonl")) if "grad_norm" in x])
            timing = ("seconds", "wall_s", "tokens_per_s")
            strip_walls = lambda t: ({k: v for k, v in t[0].items() if k not in timing},
                                     [{k: v for k, v in x.items() if k not in timing} for x in t[1]])
            check(ra.stdout.replace(by_advise, "RUN") == r.stdout.replace(advice, "RUN") and
                  strip_walls(same(by_advise)) == strip_walls(same(advice)) and
                  sorted(os.listdir(by_advise)) == ["gate.json", "probe"],
                  f"{name}: advise --warmup-gate against train --warmup-gate-only: {ra.stdout} {r.stdout}")
    r = subprocess.run(auto(w("advice-bad"), "--warmup-gate-only"), capture_output=True, text=True)
    check(r.returncode != 0 and "--warmup-gate-only needs --warmup-gate" in r.stderr and
          len(r.stderr.strip().splitlines()) == 1, f"--warmup-gate-only alone: rc {r.returncode}: {r.stderr[-300:]}")

    # Killed after update 10's checkpoint, resumed.
    killed = w("killed")
    cli_setup.kill_when(auto(killed, "--warmup-gate", threshold),
                        os.path.join(killed, "checkpoints", "checkpoint_1_10.pt"))
    mark = os.stat(os.path.join(killed, "gate.json")).st_mtime_ns
    r = run(auto(killed, "--warmup-gate", threshold), "resume")
    check("resuming at update" in r.stderr, f"resumed: {r.stderr[-300:]}")
    check(os.stat(os.path.join(killed, "gate.json")).st_mtime_ns == mark, "the resumed run probed again")
    check(updates(killed) == updates(straight) and
          strip(jsonl(os.path.join(killed, "warmup.jsonl"))) == strip(jsonl(os.path.join(straight, "warmup.jsonl"))),
          "the resumed gated run differs")

    # Refusals, one line each.
    for cmd, needle in ((auto(none, "--warmup-gate", 1), "gate.json"),
                        (argv(w("bad1"), "--warmup-steps", 0, "--warmup-gate", 1), "no warm-up to gate"),
                        (auto(w("bad3"), "--warmup-gate", -1), "--warmup-gate")):
        r = subprocess.run(cmd, capture_output=True, text=True)
        check(r.returncode != 0 and needle in r.stderr and len(r.stderr.strip().splitlines()) == 1,
              f"{cmd[-2:]}: rc {r.returncode}: {r.stderr[-300:]}")
    broken = w("broken")
    short = auto(broken, "--warmup-gate", 50)
    short[short.index("--max-steps") + 1] = "4"
    run(short, "run to break")
    open(os.path.join(broken, "gate.json"), "w").write("{not json")
    r = subprocess.run(short, capture_output=True, text=True)
    check(r.returncode != 0 and "gate.json: not a gate decision" in r.stderr and len(r.stderr.strip().splitlines()) == 1,
          f"a broken gate.json: rc {r.returncode}: {r.stderr[-300:]}")
    cmd = argv(w("bad4"), "--warmup-steps", 10, "--warmup-gate", 1)
    cmd[cmd.index("--lr-schedule") + 1] = "inverse-sqrt"
    r = subprocess.run(cmd, capture_output=True, text=True)
    check(r.returncode != 0 and "inverse-sqrt" in r.stderr and len(r.stderr.strip().splitlines()) == 1,
          f"inverse-sqrt: rc {r.returncode}: {r.stderr[-300:]}")
    cmd = auto(w("bad2"), "--warmup-gate", 1)
    cmd[cmd.index("--max-steps"):cmd.index("--max-steps") + 2] = ["--max-epochs", "1"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    check(r.returncode != 0 and "--warmup-gate needs --max-steps" in r.stderr and
          len(r.stderr.strip().splitlines()) == 1, f"no --max-steps: rc {r.returncode}: {r.stderr[-300:]}")
    return check.finish()


if __name__ == "__main__":
    sys.exit(main())
