#!/usr/bin/env python3
"""normlab train's run folder and failure modes on real data (Multi30k val, a tiny model):
the files it writes and their fields, lion's and muon's own default betas, muon's options, independent weight decay,
divergence recorded and stopped cleanly (exit 0, or 3 with --fail-on-divergence), a resumed
RUN_DIR refusing a different experiment, --keep-last, --stop-time-hours, and bad input as one
line with exit code 2."""
import json
import os
import subprocess
import sys
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import cli_setup  # noqa: E402


def main():
    args, prefix, w = cli_setup.parse_and_prepare()
    tiny = {"--train": prefix, "--valid": prefix, "--vocab-size": "300", "--d-model": "16",
            "--ffn-dim": "32", "--heads": "2", "--encoder-layers": "1", "--decoder-layers": "1",
            "--max-tokens": "1000", "--threads": "1", "--device": "cpu"}

    def run(*extra):  # the tiny options, any of them replaced by `extra`
        options = dict(tiny)
        flags = []
        it = iter(extra)
        for a in it:
            if a.startswith("--") and a in tiny:
                options[a] = next(it)
            elif a in ("--fail-on-divergence", "--valid-at-init"):
                flags.append(a)
            else:
                options[a] = next(it)
        argv = [x for kv in options.items() for x in kv] + flags
        return subprocess.run([args.normlab, "train", *argv], capture_output=True, text=True, timeout=120)

    check = cli_setup.Checks()
    # A normal run: two epochs, numbered checkpoints pruned to the newest one.
    r = run("--max-epochs", "2", "--log-interval", "5", "--keep-last", "1", "--warmup-steps", "5",
            "--out", w("ok"))
    check(r.returncode == 0, f"normal run failed: {r.stderr}")
    records = [json.loads(l) for l in open(w("ok/metrics.jsonl"))]
    steps = [x for x in records if "loss" in x and "valid_loss" not in x]
    valid = [x for x in records if "valid_loss" in x]
    check(steps and all(set(x) >= {"step", "epoch", "lr", "loss", "nll", "grad_norm", "tokens",
                                   "tokens_per_s", "wall_s"} for x in steps), "step record fields")
    check([x["epoch"] for x in valid] == [1, 2], f"one validation per epoch: {valid}")
    check(all(abs(x["valid_ppl"] - 2.718281828459045 ** x["valid_nll"]) < 1e-6 * x["valid_ppl"]
              for x in valid), "ppl = exp(nll)")
    check(valid[1]["valid_loss"] < valid[0]["valid_loss"], "validation loss falls over two epochs")
    config = json.load(open(w("ok/config.json")))
    check(config["model"]["src_vocab_size"] == 300 and config["optimizer"]["optimizer"] == "adamw",
          f"config.json resolved: {config['model'].get('src_vocab_size')}, {config['optimizer']}")
    ckpts = sorted(os.listdir(w("ok/checkpoints")))
    check(ckpts == ["checkpoint2.pt", "checkpoint_best.pt", "checkpoint_last.pt"], f"--keep-last 1: {ckpts}")
    check(os.path.exists(w("ok/vocab/spm.model")) and os.path.exists(w("ok/train.log")), "vocab, train.log")

    # --precision auto: bf16 where the CPU multiplies bf16 faster than fp32 (read here from
    # /proc/cpuinfo: AMX-BF16, or AVX512_BF16 on a CPU that is not Intel's; docs/precision.md),
    # else fp32, resolved into config.json; `normlab info` says the same.
    cpuinfo = open("/proc/cpuinfo").read().splitlines()
    flags = next((l.split(":", 1)[1].split() for l in cpuinfo if l.startswith("flags")), [])
    intel = any(l.startswith("vendor_id") and "GenuineIntel" in l for l in cpuinfo)
    native = "amx_bf16" if "amx_bf16" in flags else "avx512_bf16" if "avx512_bf16" in flags else ""
    faster = native == "amx_bf16" or (native == "avx512_bf16" and not intel)
    r = run("--precision", "auto", "--max-steps", "1", "--out", w("auto"))
    check(r.returncode == 0, f"--precision auto: {r.stderr}")
    if r.returncode == 0:
        got = json.load(open(w("auto/config.json")))["precision"]
        check(got == ("bf16" if faster else "fp32"), f"--precision auto gave {got}, flags say bf16 '{native}', Intel {intel}")
        check("warning" not in r.stderr, f"auto must never choose a bf16 that warns: {r.stderr}")
    r = run("--precision", "bf16", "--max-steps", "1", "--out", w("bf16"))
    check(r.returncode == 0 and (("emulated" in r.stderr) == (native == "")) and (("warning" in r.stderr) != faster),
          f"bf16 warns exactly when not faster, says emulated exactly when so (native '{native}', Intel {intel}): {r.stderr}")
    info = subprocess.run([args.normlab, "info", "--json", "--no-gemm"], capture_output=True, text=True, timeout=60)
    check(info.returncode == 0 and json.loads(info.stdout)["cpu_native_bf16"] == native
          and json.loads(info.stdout)["cpu_bf16_faster"] == faster,
          f"normlab info's cpu_native_bf16, cpu_bf16_faster vs flags '{native}', Intel {intel}: {info.stdout}")

    # --optimizer lion without --betas trains with Chen et al. 2023's 0.9,0.99 (lion-pytorch's
    # default), recorded in config.json; --betas given is kept.
    for extra, want in (([], [0.9, 0.99]), (["--betas", "0.9,0.98"], [0.9, 0.98])):
        out = w("lion" + "".join(extra[1:]))
        r = run("--optimizer", "lion", "--lr", "1e-4", "--max-steps", "1", *extra, "--out", out)
        got = json.load(open(os.path.join(out, "config.json")))["optimizer"] if r.returncode == 0 else None
        check(r.returncode == 0 and got["betas"] == want, f"lion {extra}: betas {got} {r.stderr[-300:]}")

    # --optimizer muon trains, without --betas with its AdamW's 0.9,0.95 (Jordan et al.'s, Moonlight's),
    # Muon's options recorded (--muon-nesterov on unless turned off).
    r = run("--optimizer", "muon", "--max-steps", "2", "--muon-adjust-lr", "original", "--muon-ns-steps", "3",
            "--out", w("muon"))
    got = json.load(open(w("muon/config.json")))["optimizer"] if r.returncode == 0 else None
    check(r.returncode == 0 and got["betas"] == [0.9, 0.95] and got["muon_adjust_lr"] == "original"
          and got["muon_ns_steps"] == 3 and got["muon_nesterov"] is True and got["muon_momentum"] == 0.95,
          f"muon: {got} {r.stderr[-300:]}")

    # --weight-decay-mode independent trains (the command gives it --lr as lr_peak) and is recorded.
    r = run("--weight-decay", "1e-4", "--weight-decay-mode", "independent", "--max-steps", "1", "--out", w("indep"))
    got = json.load(open(w("indep/config.json")))["optimizer"] if r.returncode == 0 else None
    check(r.returncode == 0 and got["weight_decay_mode"] == "independent", f"independent decay: {got} {r.stderr[-300:]}")

    # Re-running into the folder with another model is refused, naming what changed.
    r = run("--max-epochs", "3", "--d-model", "32", "--out", w("ok"))
    check(r.returncode == 2 and "model.d_model was 16, now 32" in r.stderr, f"refuses a changed model: {r.stderr}")
    # ... while a longer limit continues it.
    r = run("--max-epochs", "3", "--log-interval", "5", "--keep-last", "1", "--warmup-steps", "5",
            "--save-interval", "2", "--out", w("ok"))
    check(r.returncode == 0 and "resuming at update" in r.stderr, f"continues with a new limit: {r.stderr}")
    valid = [json.loads(l) for l in open(w("ok/metrics.jsonl")) if "valid_loss" in l]
    check([x["epoch"] for x in valid] == [1, 2, 3], f"the resumed run's records reach metrics.jsonl: {valid}")
    ckpts = os.listdir(w("ok/checkpoints"))
    check("checkpoint2.pt" in ckpts and "checkpoint3.pt" not in ckpts, f"--save-interval 2: {ckpts}")

    # --valid-at-init: the initial model's loss, equal to the validation after one SGD update at
    # lr 1e-30 (which moves no weight by more than 1e-29); the record comes before any update.
    r = run("--max-steps", "1", "--lr", "1e-30", "--lr-schedule", "constant", "--warmup-steps", "0",
            "--optimizer", "sgd", "--valid-at-init", "--out", w("init"))
    recs = [json.loads(l) for l in open(w("init/metrics.jsonl"))]
    init = [x for x in recs if "init_valid_loss" in x]
    after = [x["valid_loss"] for x in recs if "valid_loss" in x]
    check(r.returncode == 0 and len(init) == 1 and recs[0] is not None and "init_valid_loss" in recs[0] and after
          and abs(init[0]["init_valid_loss"] - after[-1]) < 1e-6, f"--valid-at-init: {r.stderr[-300:]} {init} {after}")

    # --stop-time-hours (fairseq's): 1e-9 hours (3.6 us) is over after the first update, so the run
    # stops there (a record, a mid-epoch validation, checkpoint_last); started again with the same
    # limit it has nothing to do; a larger one continues it to --max-steps.
    r = run("--max-steps", "4", "--stop-time-hours", "1e-9", "--out", w("time"))
    recs = [json.loads(l) for l in open(w("time/metrics.jsonl"))] if r.returncode == 0 else []
    stops = [x for x in recs if x.get("event") == "stop_time"]
    valid = [x for x in recs if "valid_loss" in x]
    check(r.returncode == 0 and [x["step"] for x in stops] == [1] and [x["step"] for x in valid] == [1]
          and valid[0].get("mid_epoch") is True and os.path.exists(w("time/checkpoints/checkpoint_last.pt")),
          f"--stop-time-hours stops after update 1: {r.stderr[-300:]} {stops} {valid}")
    r = run("--max-steps", "4", "--stop-time-hours", "1e-9", "--out", w("time"))
    check(r.returncode == 0 and "nothing to do" in r.stderr and "--stop-time-hours" in r.stderr,
          f"the same limit again: {r.stderr[-300:]}")
    r = run("--max-steps", "4", "--stop-time-hours", "1", "--out", w("time"))
    valid = [json.loads(l)["step"] for l in open(w("time/metrics.jsonl")) if "valid_loss" in l]
    check(r.returncode == 0 and valid == [1, 4], f"a larger limit continues to --max-steps: {valid} {r.stderr[-300:]}")

    # No intact checkpoint: the run starts over, and its records start over with it (each step once).
    r = run("--max-steps", "4", "--log-interval", "1", "--out", w("again"))
    for f in os.listdir(w("again/checkpoints")):
        with open(os.path.join(w("again/checkpoints"), f), "r+b") as ckpt:
            ckpt.truncate(100)
    r = run("--max-steps", "4", "--log-interval", "1", "--out", w("again"))
    steps = [x["step"] for x in map(json.loads, open(w("again/metrics.jsonl"))) if "loss" in x and "valid_loss" not in x]
    check(r.returncode == 0 and steps == [1, 2, 3, 4], f"a fresh start after corrupt checkpoints: steps {steps}")

    # Divergence: recorded, the run stops cleanly.
    boom = ["--optimizer", "sgd", "--lr", "1e6", "--lr-schedule", "constant", "--warmup-steps", "0",
            "--scheme", "t-fixup", "--max-steps", "50"]
    r = run(*boom, "--out", w("div"))
    last = json.loads(open(w("div/metrics.jsonl")).read().splitlines()[-1])
    check(r.returncode == 0 and last.get("event") == "diverged", f"divergence recorded, exit 0: {r.returncode} {last}")
    r = run(*boom, "--fail-on-divergence", "--out", w("div2"))
    check(r.returncode == 3, f"--fail-on-divergence exits 3, got {r.returncode}")

    # Bad input: one line, exit 2.
    for lang in ("de", "en"):
        open(w(f"empty.{lang}"), "w").close()
    bad = [
        (["--max-steps", "5", "--valid", w("empty"), "--out", w("x")], "no sentence pair left to score"),
        (["--max-steps", "5", "--test", w("empty"), "--out", w("x2")], "no sentence pair left to score"),
        ([], "--train is required"),
        (["--max-steps", "5", "--train", prefix + "-missing", "--out", w("x")], "val-missing"),
        (["--out", w("x")], "set --max-epochs or --max-steps"),
        (["--max-steps", "5", "--optimizer", "lamb", "--out", w("x")], "--optimizer"),
        (["--max-steps", "5", "--lr-schedule", "t-fixup", "--out", w("x")], "--warmup-steps"),
        (["--max-steps", "5", "--update-freq", "0", "--out", w("x")], "--update-freq"),
        (["--max-steps", "5", "--betas", "0.9", "--out", w("x")], "--betas"),
        (["--max-steps", "5", "--stop-time-hours", "-1", "--out", w("x")], "--stop-time-hours"),
        (["--max-steps", "5", "--optimizer", "adam", "--weight-decay-mode", "independent", "--out", w("x")],
         "--weight-decay-mode applies to --optimizer adamw|lion"),
        (["--max-steps", "5", "--muon-momentum", "0.9", "--out", w("x")],
         "--muon-momentum applies to --optimizer muon only, not adamw"),
        (["--max-epochs", "1", "--lr-schedule", "wsd", "--wsd-decay-steps", "2", "--out", w("x")],
         "--lr-schedule wsd needs --max-steps"),
        (["--max-steps", "10", "--lr-schedule", "wsd", "--warmup-steps", "5", "--wsd-decay-steps", "6",
          "--out", w("x")], "--wsd-decay-steps 6 exceeds --max-steps 10 minus --warmup-steps 5"),
    ]
    for argv, expected in bad:
        r = run(*argv) if argv else subprocess.run([args.normlab, "train"], capture_output=True, text=True)
        lines = r.stderr.strip().splitlines()
        check(r.returncode == 2 and lines and expected in lines[-1] and lines[-1].startswith("normlab: error"),
              f"bad input {argv}: rc={r.returncode} {r.stderr!r}")
    return check.finish()


if __name__ == "__main__":
    sys.exit(main())
