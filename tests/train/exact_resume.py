#!/usr/bin/env python3
"""Exact resume (issue 3 §6): training 2N updates straight through, and training with a
SIGKILL at a random moment after update N's checkpoint followed by a resume, give
bit-identical parameters on the CPU with dropout on. Also: a corrupted checkpoint_last.pt makes
the resume fall back to the newest intact checkpoint, and says so. With --precision bf16 (issue
15): the same in mixed precision, the run really is bf16 (its parameters differ from the fp32
run's), and resuming it with another --precision is refused. With --model-kind decoder-only
(issue 35): the same for a language model on blocks of running text; with --model-kind
encoder-only for a masked LM (its masks drawn anew every epoch from (seed, epoch, block)),
validating every 40 updates inside the epoch (--validate-interval-updates). And (issue 34) the
killed run's metrics.jsonl holds the uninterrupted run's records (clock fields aside): the first
record after the resume averages the whole logging interval (the checkpoint at N falls inside
one), and a run killed as its last checkpoint appears (before, that checkpoint came ahead of
the final validation and --test, which a re-run then never wrote) ends with every record; so
does a folder an older normlab left in that state."""
import json
import os
import random
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import cli_setup  # noqa: E402

N = 100  # updates before the checkpoint; the runs train 2N (about 1 s on one core)


def train_args(normlab, prefix, out, precision, kind="encoder-decoder"):
    single_stack = kind in ("decoder-only", "encoder-only")
    if single_stack:  # the English side as running text, in blocks of 32
        data = ["--model-kind", kind, "--train", prefix + ".en.gz", "--valid", prefix + ".en.gz",
                "--layers", "2", "--block-size", "32", "--max-positions", "64"]
        if kind == "encoder-only":  # and validations inside the epoch (checkpoints written after them)
            data += ["--validate-interval-updates", "40"]
    else:
        data = ["--train", prefix, "--valid", prefix, "--src", "de", "--tgt", "en",
                "--encoder-layers", "2", "--decoder-layers", "2"]
    return [normlab, "train", *data,
            "--vocab-size", "300", "--d-model", "16", "--ffn-dim", "32", "--heads", "2", "--dropout", "0.3",
            "--max-tokens", "200", "--max-steps", str(2 * N), "--save-interval-updates", str(N),
            "--log-interval", "30", "--test", prefix + (".en.gz" if single_stack else ""), "--lr", "1e-3", "--seed", "5", "--threads", "1",
            "--device", cli_setup.DEVICE, "--precision", precision, "--out", out]


CLOCK_FIELDS = ("wall_s", "tokens_per_s", "sync_s")


def records(run_dir):
    """metrics.jsonl's records without the fields that time the run."""
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        return [{k: v for k, v in json.loads(line).items() if k not in CLOCK_FIELDS} for line in f]


def kill_and_resume(run, out, marker, delay):
    """Starts run(out), SIGKILLs it `delay` s after `marker` appears, runs it again; the second
    run's stderr, or None (and a message) when it failed or did not resume."""
    cli_setup.kill_when(run(out), os.path.join(out, "checkpoints", marker), delay)
    resumed = subprocess.run(run(out), capture_output=True, text=True)
    if resumed.returncode != 0:
        print("resume failed:", resumed.stderr)
        return None
    return resumed.stderr


def main():
    args, prefix, w = cli_setup.parse_and_prepare(
        lambda ap: (ap.add_argument("--precision", default="fp32", choices=["fp32", "bf16"]),
                    ap.add_argument("--model-kind", default="encoder-decoder",
                                    choices=["encoder-decoder", "decoder-only", "encoder-only"])))
    straight, killed = w("straight"), w("killed")
    run = lambda out: train_args(args.normlab, prefix, out, args.precision, args.model_kind)

    subprocess.run(run(straight), check=True, capture_output=True)

    # The same run, killed at a random moment after update N's checkpoint, then resumed; and
    # one killed as soon as its last checkpoint appears.
    last = "checkpoints/checkpoint_last.pt"
    expected = records(straight)
    for out, marker, delay in ((killed, f"checkpoint_1_{N}.pt", random.uniform(0.0, 0.25)),
                               (w("killed_end"), f"checkpoint_1_{2 * N}.pt", 0.0)):
        stderr = kill_and_resume(run, out, marker, delay)
        if stderr is None:
            return 1
        if out == killed and "resuming at update" not in stderr:
            print("the second run did not resume:", stderr)
            return 1
        if not cli_setup.same_parameters(os.path.join(straight, last), os.path.join(out, last)):
            print(f"FAIL: parameters after kill + resume ({marker}) differ from the uninterrupted run")
            return 1
        if records(out) != expected:
            print(f"FAIL: metrics.jsonl after kill + resume ({marker}) differs from the uninterrupted run's:\n",
                  "\n".join(map(str, records(out))), "\nexpected:\n", "\n".join(map(str, expected)))
            return 1

    # A folder that a normlab older than 2026-11-26 left when it was stopped between the last
    # update's checkpoint (then written first) and the final validation: the checkpoint of update
    # 2N is there, its records are not. Started again, the run goes on from an earlier checkpoint
    # and ends as the uninterrupted run did (before, it said "complete" and wrote nothing).
    old = w("older_binary")
    shutil.copytree(straight, old)
    kept = [line for line in open(os.path.join(old, "metrics.jsonl")) if json.loads(line).get("step") != 2 * N]
    with open(os.path.join(old, "metrics.jsonl"), "w") as f:
        f.writelines(kept)
    again = subprocess.run(run(old), capture_output=True, text=True)
    if again.returncode != 0 or "going on from update" not in again.stderr or "unreadable" in again.stderr:
        print("FAIL: the older binary's folder was not completed:", again.returncode, again.stderr)
        return 1
    if records(old) != expected or not cli_setup.same_parameters(os.path.join(straight, last), os.path.join(old, last)):
        print("FAIL: the older binary's folder, completed, differs from the uninterrupted run")
        return 1

    # A corrupted (half-written) checkpoint_last.pt: continuing the run (a larger limit: at the
    # same limit the run is complete) falls back to the newest intact checkpoint. (Zeroing bytes
    # in the middle of the file can land in the zip container's padding and change nothing.)
    with open(os.path.join(killed, last), "r+b") as f:
        f.truncate(os.path.getsize(f.name) // 2)
    more = run(killed)
    more[more.index("--max-steps") + 1] = str(2 * N + 10)
    fallback = subprocess.run(more, capture_output=True, text=True)
    if fallback.returncode != 0 or "resuming from" not in fallback.stderr:
        print("FAIL: no fallback to an intact checkpoint:", fallback.returncode, fallback.stderr)
        return 1
    if args.precision != "fp32":
        other = train_args(args.normlab, prefix, killed, "fp32", args.model_kind)
        refused = subprocess.run(other, capture_output=True, text=True)
        if refused.returncode != 2 or f'precision was "{args.precision}", now "fp32"' not in refused.stderr:
            print("FAIL: resuming with another --precision was not refused:", refused.returncode, refused.stderr)
            return 1
        fp32 = w("fp32")
        subprocess.run(train_args(args.normlab, prefix, fp32, "fp32", args.model_kind), check=True,
                       capture_output=True)
        if cli_setup.same_parameters(os.path.join(straight, last), os.path.join(fp32, last)):
            print(f"FAIL: the {args.precision} run ended with the fp32 run's parameters: no mixed precision")
            return 1
    print(f"1 passed, 0 failed ({args.model_kind}, {args.precision})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
