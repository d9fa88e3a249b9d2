#!/usr/bin/env python3
"""`normlab train --curvature-every` (issue 17) on Multi30k val with a tiny model: the series'
records and their thresholds (38/lr for AdamW at beta1 0.9, 2/lr for gradient descent, the
ratio), and a run killed (SIGKILL) after update 10's checkpoint and resumed writes the same
series, bit for bit (the warm-start vectors are in the checkpoint), as an uninterrupted run;
`normlab probe --critical-lr` writes its table."""
import csv
import json
import math
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import cli_setup  # noqa: E402


def main():
    args, prefix, w = cli_setup.parse_and_prepare()
    check = cli_setup.Checks()

    def argv(out):
        return cli_setup.tiny_train(args.normlab, prefix, out, "--max-tokens", 1000, "--dropout", 0.3, "--lr", "1e-3",
                                    "--warmup-steps", 8, "--max-steps", 30, "--save-interval-updates", 10,
                                    "--curvature-every", 5, "--curvature-sentences", 24, "--curvature-steps", 6)

    def series(out):
        return [json.loads(l) for l in open(os.path.join(out, "curvature.jsonl"))]

    straight, killed = w("straight"), w("killed")
    r = subprocess.run(argv(straight), capture_output=True, text=True)
    check(r.returncode == 0, f"run failed: {r.stderr}")
    recs = series(straight)
    check([x["step"] for x in recs] == list(range(0, 31, 5)), f"measured at 0, 5, ..., 30: {recs}")
    for x in recs[1:]:
        check(abs(x["adam_threshold"] - 38 / x["lr"]) < 1e-9 * x["adam_threshold"] and
              abs(x["sgd_threshold"] - 2 / x["lr"]) < 1e-9 * x["sgd_threshold"] and
              abs(x["ratio"] - x["preconditioned_lambda_max"] / x["adam_threshold"]) < 1e-12 * x["ratio"] + 1e-300 and
              x["lambda_max"] > 0 and x["preconditioner"] == "next", f"record fields: {x}")
    check(recs[0]["lr"] == 0 and recs[0]["threshold"] is None, f"update 0 at lr 0: no threshold: {recs[0]}")

    cli_setup.kill_when(argv(killed), os.path.join(killed, "checkpoints", "checkpoint_1_10.pt"))
    r = subprocess.run(argv(killed), capture_output=True, text=True)
    check(r.returncode == 0 and "resuming at update" in r.stderr, f"resume failed: {r.stderr}")
    strip = lambda rs: [{k: v for k, v in x.items() if k != "seconds"} for x in rs]
    check(strip(series(killed)) == strip(recs), "the resumed series differs from the uninterrupted one")
    # --curvature-preconditioner cohen (Cohen et al. 2022's P = (1 - beta1^t) x current's): the
    # same run measured with each P; the operator differs by the constant 1/(1 - beta1^t), so
    # Lanczos from the same starts finds current's value over it; only cohen's records have the factor.
    runs = {}
    for kind in ("current", "cohen"):
        cmd = argv(w(kind)) + ["--curvature-preconditioner", kind]
        cmd[cmd.index("--max-steps") + 1] = "10"
        r = subprocess.run(cmd, capture_output=True, text=True)
        check(r.returncode == 0, f"--curvature-preconditioner {kind}: {r.stderr}")
        runs[kind] = series(w(kind)) if r.returncode == 0 else []
    for cur, coh in zip(runs["current"], runs["cohen"]):
        if cur["step"] == 0:
            check(cur["preconditioned_lambda_max"] is None and coh["preconditioned_lambda_max"] is None and
                  coh["bias_correction1"] == 0, f"update 0: no P yet: {cur} {coh}")
            continue
        factor = 1 - 0.9 ** cur["step"]
        check("bias_correction1" not in cur and abs(coh["bias_correction1"] - factor) < 1e-12 and
              coh["preconditioner"] == "cohen" and coh["lambda_max"] == cur["lambda_max"] and
              abs(coh["preconditioned_lambda_max"] * factor - cur["preconditioned_lambda_max"]) <
              1e-4 * cur["preconditioned_lambda_max"] and
              abs(coh["ratio"] - coh["preconditioned_lambda_max"] / coh["adam_threshold"]) < 1e-12 * coh["ratio"],
              f"cohen against current: {cur} {coh}")
    check(len(runs["cohen"]) == 3, f"cohen measured at 0, 5, 10: {runs['cohen']}")
    # --curvature: the series at its default interval (500 updates: only update 0 in 3 updates).
    default = w("default")
    cmd = argv(default) + ["--curvature", "--curvature-per-block"]
    for option, value in (("--curvature-every", "0"), ("--max-steps", "3")):
        cmd[cmd.index(option) + 1] = value
    r = subprocess.run(cmd, capture_output=True, text=True)
    check(r.returncode == 0 and [x["step"] for x in series(default)] == [0] and
          json.load(open(os.path.join(default, "config.json")))["curvature"]["every"] == 500,
          f"--curvature: {r.stderr}")
    # --curvature-per-block: lambda_1 of every sub-layer block of the 1+1-layer Post-LN model.
    if r.returncode == 0:
        blocks = series(default)[0].get("blocks", {})
        layer = lambda stack, *names: {f"{stack}.layers.0.{n}" for n in names}
        expected = ({"embeddings"} | layer("encoder", "self_attn.qk", "self_attn.vo", "ffn", "norms") |
                    layer("decoder", "self_attn.qk", "self_attn.vo", "encoder_attn.qk", "encoder_attn.vo", "ffn", "norms"))
        check(set(blocks) == expected and all(math.isfinite(v) for v in blocks.values()),
              f"--curvature-per-block: {blocks}")

    # probe --critical-lr: one row per scheme, seed and optimiser; an lr_c inside the range.
    out = w("critical")
    r = subprocess.run([args.normlab, "--threads", "1", "probe", "--critical-lr", "--schemes", "post-ln,pre-ln",
                        "--d-model", "16", "--ffn-dim", "32", "--heads", "2", "--encoder-layers", "1",
                        "--decoder-layers", "1", "--seeds", "2", "--batches", "1", "--vocab-size", "60",
                        "--out", out], capture_output=True, text=True)
    check(r.returncode == 0, f"probe --critical-lr failed: {r.stderr}")
    rows = list(csv.DictReader(open(os.path.join(out, "critical_lr.csv"))))
    check([(x["scheme"], x["optimizer"]) for x in rows] ==
          [(s, o) for s in ("post-ln", "pre-ln") for _ in range(2) for o in ("sgd", "adam")], f"rows: {rows}")
    check(all(x["bracketed"] == "1" and 1e-6 < float(x["lr_c"]) < 1e3 and float(x["curvature"]) > 0 for x in rows),
          f"every lr_c bracketed inside the range: {rows}")

    # advise: the same model and random batches as probe --critical-lr's pre-ln (dropout off in
    # both), so the same Adam lr_c per seed; the rule and the proposal from those numbers.
    common = ["--scheme", "pre-ln", "--d-model", "16", "--ffn-dim", "32", "--heads", "2", "--encoder-layers", "1",
              "--decoder-layers", "1", "--seeds", "2", "--batches", "1", "--vocab-size", "60"]
    probe_lr_c = [float(x["lr_c"]) for x in rows if x["scheme"] == "pre-ln" and x["optimizer"] == "adam"]
    for lr in ("1e-3", "10"):
        out = w("advise" + lr)
        r = subprocess.run([args.normlab, "--threads", "1", "advise", *common, "--optimizer", "adam", "--lr", lr,
                            "--out", out], capture_output=True, text=True)
        check(r.returncode == 0, f"advise failed: {r.stderr}")
        if r.returncode != 0:
            continue
        a = json.load(open(os.path.join(out, "advise.json")))
        lr_c = [x["lr_c"] for x in a["seeds"]]
        median = sum(lr_c) / 2
        ratio = sorted(x["curvature"] * float(lr) * 0.1 / 3.8 for x in a["seeds"])  # lambda / (38 / lr)
        check(all(abs(x - y) <= 1e-9 * y for x, y in zip(lr_c, probe_lr_c)), f"advise lr_c {lr_c} vs probe's {probe_lr_c}")
        check(abs(a["median_lr_c"] - median) <= 1e-12 * median and
              abs(a["median_threshold_ratio"] - sum(ratio) / 2) <= 1e-9 * a["median_threshold_ratio"],
              f"medians: {a}")
        needs = float(lr) > median
        init = median / 2 if needs else 0.0
        steps = math.ceil((float(lr) - init) / (0.01 * init)) if needs else 0
        check(a["needs_warmup"] == needs and abs(a["warmup_init_lr"] - init) <= 1e-12 * max(init, 1e-300) and
              a["warmup_steps"] == steps and ("needs warm-up" if needs else "trains without warm-up") in r.stdout,
              f"advise at lr {lr}: {a['needs_warmup']} {a['warmup_init_lr']} {a['warmup_steps']}; {r.stdout}")
    r = subprocess.run([args.normlab, "advise", *common, "--lr", "-1", "--out", w("advise-bad")],
                       capture_output=True, text=True)
    check(r.returncode == 2 and "--lr must be > 0" in r.stderr, f"advise --lr -1: {r.returncode} {r.stderr}")
    return check.finish()


if __name__ == "__main__":
    sys.exit(main())
