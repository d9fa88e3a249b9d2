#!/usr/bin/env python3
"""A stopped rank 0 (SIGSTOP, without torchrun; issue 34 §1): its process serves the rendezvous
store, whose socket the kernel keeps open, so a call to it is never refused, only unanswered.
Two ranks started directly (RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT) with --dist-timeout 3:

- rank 0 stopped mid-training: rank 1's all-reduce times out, its query of the store must too;
- rank 0 stopped before rank 1 starts: rank 1's check-in must time out.

Either way rank 1 exits 2 within the timeout plus a few seconds, with one line naming rank 0."""
import os
import signal
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import cli_setup  # noqa: E402

TIMEOUT = 3     # --dist-timeout
SLACK = 10      # the gloo timeout, the failure path's store queries (<= 5 s) and the process start
HUNG = 40       # a rank 1 still running after this is hung


def main():
    args, prefix, w = cli_setup.parse_and_prepare()
    check = cli_setup.Checks()

    def argv(out):
        return cli_setup.tiny_train(args.normlab, prefix, out, "--max-tokens", 1500, "--lr", "1e-3", "--dropout", 0,
                                    "--log-interval", 1, "--max-steps", 100000, "--dist-timeout", TIMEOUT)

    def start(out, rank, port):
        env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), WORLD_SIZE="2", RANK=str(rank))
        return subprocess.Popen(argv(out), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)

    def outcome(proc, since):
        """(returncode, seconds since `since`, stderr) of rank 1, killed as hung after HUNG s."""
        try:
            err = proc.communicate(timeout=HUNG)[1]
        except subprocess.TimeoutExpired:
            proc.kill()
            err = proc.communicate()[1] + "(hung: killed by the test)"
        return proc.returncode, time.time() - since, err

    def judge(case, rc, took, err):
        lines = err.strip().splitlines()
        check(rc == 2 and took < TIMEOUT + SLACK and len(lines) == 1 and "rank 0" in lines[0],
              f"{case}: rank 1 exit {rc} after {took:.1f} s (want 2 within {TIMEOUT + SLACK} s, one line "
              f"naming rank 0): {err[-600:]!r}")
        print(f"{case}: rank 1 exit {rc} after {took:.1f} s: {lines[-1] if lines else ''}")

    # 1. Mid-training: stop rank 0 once rank 0 has logged an update (both are in the loop).
    out, port = w("mid"), cli_setup.free_port()
    ranks = [start(out, r, port) for r in range(2)]
    metrics = os.path.join(out, "metrics.jsonl")
    deadline = time.time() + 120
    while time.time() < deadline and ranks[0].poll() is None and not (
            os.path.exists(metrics) and os.path.getsize(metrics) > 0):
        time.sleep(0.01)
    ranks[0].send_signal(signal.SIGSTOP)
    judge("rank 0 stopped mid-training", *outcome(ranks[1], time.time()))
    ranks[0].kill()
    ranks[0].communicate()

    # 2. At the check-in: rank 0 serves the store, is stopped, then rank 1 starts.
    out, port = w("join"), cli_setup.free_port()
    rank0 = start(out, 0, port)
    deadline = time.time() + 60
    while time.time() < deadline and rank0.poll() is None:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            time.sleep(0.01)
    rank0.send_signal(signal.SIGSTOP)
    since = time.time()
    judge("rank 0 stopped before rank 1 joins", *outcome(start(out, 1, port), since))
    rank0.kill()
    rank0.communicate()
    return check.finish()


if __name__ == "__main__":
    sys.exit(main())
