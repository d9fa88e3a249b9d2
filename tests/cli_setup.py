"""Shared start and end of the Python CLI tests: arguments, data check and a fresh workdir;
failed checks collected, reported and turned into the exit code."""
import argparse
import os
import shutil
import socket
import sys


def _parse(options, add_arguments):
    ap = argparse.ArgumentParser()
    for name in ("normlab", *options, "workdir"):
        ap.add_argument("--" + name, required=True)
    if add_arguments:
        add_arguments(ap)
    return ap.parse_args()


def _fresh_workdir(args):
    shutil.rmtree(args.workdir, ignore_errors=True)
    os.makedirs(args.workdir)
    return lambda name: os.path.join(args.workdir, name)


def start(*options, add_arguments=None):
    """Parses the required --normlab, --workdir and --OPTION for each name in `options` (plus
    what add_arguments(parser) adds), empties the workdir; returns (args, w(name) -> path in it)."""
    args = _parse(options, add_arguments)
    return args, _fresh_workdir(args)


def start_lm():
    """start("data") for the tests on English running text: returns (args, w, DATA/lm); without
    that folder, prints SKIP's reason and exits with 0."""
    args, w = start("data")
    lm = os.path.join(args.data, "lm")
    if not os.path.isdir(lm):
        print(f"SKIP: no data at {lm}")
        sys.exit(0)
    return args, w, lm


def parse_and_prepare(add_arguments=None):
    """start("data") for the tests that train on Multi30k val: returns (args, prefix of
    multi30k/val, w); without the data, prints SKIP's reason and exits with 0."""
    args = _parse(("data",), add_arguments)
    prefix = os.path.join(args.data, "multi30k", "val")
    if not os.path.exists(prefix + ".de.gz"):
        print(f"SKIP: no data at {args.data}")
        sys.exit(0)
    return args, prefix, _fresh_workdir(args)


class Checks:
    """check(cond, what) records `what` when cond is false; check.failures is the list."""

    def __init__(self):
        self.failures = []

    def __call__(self, cond, what):
        if not cond:
            self.failures.append(what)

    def finish(self, details=None, show=None):
        """Prints "FAIL: what" per failure (the first `show` of them when given), then "ok" or
        "N failures", followed by "; details" when given; returns the exit code (1 on failure)."""
        for what in self.failures[:show]:
            print("FAIL:", what)
        verdict = f"{len(self.failures)} failures" if self.failures else "ok"
        print(f"{verdict}; {details}" if details else verdict)
        return 1 if self.failures else 0


def run(normlab, *argv, expect=0):
    """Runs `normlab ARGV` (each argument str()-ed), its output captured; exits with FAIL and its
    stderr unless its exit code is `expect`. Returns the CompletedProcess."""
    import subprocess
    r = subprocess.run([normlab, *map(str, argv)], capture_output=True, text=True)
    if r.returncode != expect:
        sys.exit(f"FAIL: {' '.join(map(str, argv))} exited {r.returncode}, expected {expect}: {r.stderr}")
    return r


def same_parameters(a, b):
    """Whether two normlab checkpoints hold bit-identical parameters (optimiser state, random
    streams and metadata aside)."""
    import torch

    def parameters(checkpoint):
        state = torch.load(checkpoint)
        return {k: v for k, v in state.items() if not k.startswith(("extra/", "__normlab"))}

    pa, pb = parameters(a), parameters(b)
    return pa.keys() == pb.keys() and all(torch.equal(pa[k], pb[k]) for k in pa)


# The device the command-line tests train on: the CPU, or what NORMLAB_TEST_DEVICE names (cuda,
# cuda:0) where scripts/device-check runs them on a GPU (docs/gpu.md).
DEVICE = os.environ.get("NORMLAB_TEST_DEVICE", "cpu")


def tiny_train(normlab, prefix, out, *more):
    """`normlab train` argv of a 16-wide 1 + 1-layer model with a 300-piece vocabulary, trained and
    validated on `prefix`, one CPU thread, on DEVICE, into `out`; `more`: the test's own options."""
    return [normlab, "train", "--train", prefix, "--valid", prefix, "--vocab-size", "300", "--d-model", "16",
            "--ffn-dim", "32", "--heads", "2", "--encoder-layers", "1", "--decoder-layers", "1",
            "--threads", "1", "--device", DEVICE, *map(str, more), "--out", out]


def kill_when(argv, marker, delay=0.0):
    """Starts `argv`, SIGKILLs it `delay` s after the file `marker` appears (or when it ends by
    itself first) and waits for it: a run killed at a known point, to be resumed."""
    import signal
    import subprocess
    import time
    proc = subprocess.Popen(argv, stderr=subprocess.DEVNULL)
    while not os.path.exists(marker) and proc.poll() is None:
        time.sleep(0.005)
    time.sleep(delay)
    proc.send_signal(signal.SIGKILL)
    proc.wait()


def free_port():
    """A TCP port on 127.0.0.1 free at the moment of asking (for a rank-0 store)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
