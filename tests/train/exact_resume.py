#!/usr/bin/env python3
"""Exact resume (issue 3 §6): training 2N updates straight through, and training with a
SIGKILL at a random moment after update N's checkpoint followed by a resume, give
bit-identical parameters on the CPU with dropout on. Also: a corrupted checkpoint_last.pt makes
the resume fall back to the newest intact checkpoint, and says so. With --precision bf16 (issue
15): the same in mixed precision, the run really is bf16 (its parameters differ from the fp32
run's), and resuming it with another --precision is refused. With --model-kind decoder-only
(issue 35): the same for a language model on blocks of running text."""
import os
import random
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import cli_setup  # noqa: E402

N = 100  # updates before the checkpoint; the runs train 2N (about 1 s on one core)


def train_args(normlab, prefix, out, precision, kind="encoder-decoder"):
    if kind == "decoder-only":  # the English side as running text, in blocks of 32
        data = ["--model-kind", kind, "--train", prefix + ".en.gz", "--valid", prefix + ".en.gz",
                "--layers", "2", "--block-size", "32", "--max-positions", "64"]
    else:
        data = ["--train", prefix, "--valid", prefix, "--src", "de", "--tgt", "en",
                "--encoder-layers", "2", "--decoder-layers", "2"]
    return [normlab, "train", *data,
            "--vocab-size", "300", "--d-model", "16", "--ffn-dim", "32", "--heads", "2", "--dropout", "0.3",
            "--max-tokens", "200", "--max-steps", str(2 * N), "--save-interval-updates", str(N),
            "--log-interval", "10", "--lr", "1e-3", "--seed", "5", "--threads", "1",
            "--device", "cpu", "--precision", precision, "--out", out]


def main():
    args, prefix, w = cli_setup.parse_and_prepare(
        lambda ap: (ap.add_argument("--precision", default="fp32", choices=["fp32", "bf16"]),
                    ap.add_argument("--model-kind", default="encoder-decoder",
                                    choices=["encoder-decoder", "decoder-only"])))
    straight, killed = w("straight"), w("killed")
    run = lambda out: train_args(args.normlab, prefix, out, args.precision, args.model_kind)

    subprocess.run(run(straight), check=True, capture_output=True)

    # The same run, killed at a random moment after update N's checkpoint, then resumed.
    proc = subprocess.Popen(run(killed), stderr=subprocess.DEVNULL)
    marker = os.path.join(killed, "checkpoints", f"checkpoint_1_{N}.pt")
    while not os.path.exists(marker) and proc.poll() is None:
        time.sleep(0.005)
    time.sleep(random.uniform(0.0, 0.25))
    was_running = proc.poll() is None
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    resumed = subprocess.run(run(killed), capture_output=True, text=True)
    if resumed.returncode != 0:
        print("resume failed:", resumed.stderr)
        return 1
    if "resuming at update" not in resumed.stderr:
        print("the second run did not resume:", resumed.stderr)
        return 1
    last = "checkpoints/checkpoint_last.pt"
    if not cli_setup.same_parameters(os.path.join(straight, last), os.path.join(killed, last)):
        print("FAIL: parameters after kill + resume differ from the uninterrupted run")
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
    print(f"1 passed, 0 failed ({args.model_kind}, {args.precision}, killed {'during' if was_running else 'after'} training)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
