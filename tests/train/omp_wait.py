"""Issue 34 §4 (docs/runtime.md, "A busy machine"): `normlab train --threads 2` beside a CPU-bound
process restarts once with GOMP_SPINCOUNT=1000, as libgomp itself reports it (OMP_DISPLAY_ENV=VERBOSE
prints the values it read, once per process start); a GOMP_SPINCOUNT or OMP_WAIT_POLICY of the
user's is left alone (no restart), as is a run on one thread; and the restarted run trains to the same parameters as one
that was told the spin count from the start (the spin count changes speed only)."""
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import cli_setup  # noqa: E402


def spin_counts(stderr):
    return re.findall(r"GOMP_SPINCOUNT = '(\d+)'", stderr)


def main():
    args, prefix, w = cli_setup.parse_and_prepare()
    check = cli_setup.Checks()

    def train(out, env, threads=2):
        argv = cli_setup.tiny_train(args.normlab, prefix, w(out), "--max-steps", 2)
        argv[argv.index("--threads") + 1] = str(threads)
        r = subprocess.run(argv, capture_output=True, text=True, env={**os.environ, **env})
        check(r.returncode == 0, f"{out}: exit {r.returncode}: {r.stderr[-500:]}")
        return spin_counts(r.stderr)

    burner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        busy = train("busy", {"OMP_DISPLAY_ENV": "VERBOSE"})
        user = train("user", {"OMP_DISPLAY_ENV": "VERBOSE", "GOMP_SPINCOUNT": "1000"})
        policy = train("policy", {"OMP_DISPLAY_ENV": "VERBOSE", "OMP_WAIT_POLICY": "ACTIVE"})
        one = train("one", {"OMP_DISPLAY_ENV": "VERBOSE"}, threads=1)
    finally:
        burner.kill()
        burner.wait()
    # libgomp's default read at the first start (300000, or its throttled count), then 1000 after the restart.
    check(len(busy) == 2 and busy[-1] == "1000", f"busy machine: libgomp read GOMP_SPINCOUNT {busy}, expected a restart with 1000")
    check(user == ["1000"], f"GOMP_SPINCOUNT given: libgomp read {user}, expected ['1000'] once (no restart)")
    check(len(policy) == 1, f"OMP_WAIT_POLICY given: libgomp started {len(policy)} times, expected once (no restart)")
    check(len(one) == 1, f"--threads 1: libgomp started {len(one)} times, expected once (no restart)")
    check(cli_setup.same_parameters(w("busy/checkpoints/checkpoint_last.pt"), w("user/checkpoints/checkpoint_last.pt")),
          "the restarted run's parameters differ from a run given GOMP_SPINCOUNT=1000 from the start")
    return check.finish()


if __name__ == "__main__":
    sys.exit(main())
