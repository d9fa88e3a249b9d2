#!/usr/bin/env python3
"""Data-parallel `normlab train` (issue 16): two processes with Gloo on 127.0.0.1, tiny models
on Multi30k val, seconds each.

- Equivalence: 2 ranks x --update-freq 1 and 1 rank x --update-freq 2 walk the same batches;
  their parameters after every update are bit-identical (dropout off: each rank has its own
  dropout stream), across an epoch end whose last update has one batch for two ranks, while
  both measure the curvature series, which agrees to float32 summation (1e-4; 1e-3 at update 0).
  The 2 ranks use 2 KB gradient buckets (--bucket-cap-mb), so the all-reduce runs in many
  buckets, most of them started by the hooks during backward (the records' `overlap`).
- torchrun --standalone --no-python starts the same job (its agent serves the store), and so do
  two torchrun agents as two nodes (--nnodes 2, c10d rendezvous on 127.0.0.1).
- Faults: rank 1 killed with SIGKILL after a checkpoint makes rank 0 stop, non-zero, naming
  the lost rank, within seconds; launching again resumes from the last intact checkpoint and
  ends bit-identical to an uninterrupted 2-rank run with dropout on (each rank's stream is in
  the checkpoint); under torchrun --max-restarts 1 the agent restarts the workers after one is
  killed and they resume by themselves to the same end. A port in use, a missing rank, another
  WORLD_SIZE and another option on one rank are one clear error each.
- --warmup-gate (issue 37) with 2 ranks: the probe trains data-parallel and rank 0 decides for
  both; gate.json's loss drop and decision, and every training record, equal those of 1 rank x
  --update-freq 2 with the same gate, for a gate above the drop (no warm-up) and below it (the
  warm-up).
- One writer per RUN_DIR: a second train into a folder in use gets one line naming it and the
  holder's pid (hessian, probe and perturb lock OUT alike); a complete run started again
  changes nothing; a --max-steps stop inside an epoch writes its last training record and a
  validation."""
import fcntl
import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import time

import torch
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import cli_setup  # noqa: E402


def digest(path):
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def main():
    args, prefix, w = cli_setup.parse_and_prepare()
    check = cli_setup.Checks()

    def argv(out, *extra, dropout="0"):  # the tiny run's options, any of them replaced by `extra`
        options = {"--train": prefix, "--valid": prefix, "--vocab-size": "300", "--d-model": "16",
                   "--ffn-dim": "32", "--heads": "2", "--encoder-layers": "1", "--decoder-layers": "1",
                   "--max-tokens": "1500", "--lr": "1e-3", "--warmup-steps": "4", "--dropout": dropout,
                   "--seed": "3", "--threads": "1", "--device": cli_setup.DEVICE, "--log-interval": "1",
                   "--dist-timeout": "20", "--out": out}
        options.update(zip(extra[::2], extra[1::2]))
        return [args.normlab, "train", *[x for kv in options.items() for x in kv]]

    def env(rank, world, port, **more):
        e = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), WORLD_SIZE=str(world),
                 RANK=str(rank), LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(world))
        e.update(more)
        return e

    def launch(cmds, timeout=120):
        """Starts one process per (argv, env); returns [(returncode, stderr)] in rank order."""
        procs = [subprocess.Popen(a, env=e, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
                 for a, e in cmds]
        errs = [p.communicate(timeout=timeout)[1] for p in procs]
        return [(p.returncode, e) for p, e in zip(procs, errs)]

    def two_ranks(out, *extra, dropout="0", port=None):
        port = port or cli_setup.free_port()
        return launch([(argv(out, *extra, dropout=dropout), env(r, 2, port)) for r in range(2)])

    # 1. Equivalence, over an epoch end (Multi30k val at 1500 tokens: an odd number of batches).
    one, two = w("one"), w("two")
    # Both also measure the curvature series (issue 17), which must not change the training.
    curvature = ("--curvature-every", "5", "--curvature-sentences", "200", "--curvature-steps", "4")  # 200: several batches
    r = subprocess.run(argv(one, "--max-epochs", "2", "--update-freq", "2", "--save-interval-updates", "1",
                            *curvature), capture_output=True, text=True)
    check(r.returncode == 0, f"1 rank x update-freq 2 failed: {r.stderr}")
    results = two_ranks(two, "--max-epochs", "2", "--save-interval-updates", "1", "--bucket-cap-mb", "0.002",
                        *curvature)
    check(all(rc == 0 for rc, _ in results), f"2 ranks failed: {results}")
    ones = sorted(f for f in os.listdir(os.path.join(one, "checkpoints")) if f.startswith("checkpoint_"))
    twos = sorted(f for f in os.listdir(os.path.join(two, "checkpoints")) if f.startswith("checkpoint_"))
    check(ones == twos and len(ones) > 10, f"the same updates: {ones} vs {twos}")
    differ = [f for f in ones if f in twos and not cli_setup.same_parameters(os.path.join(one, "checkpoints", f),
                                                         os.path.join(two, "checkpoints", f))]
    check(not differ, f"parameters differ between 2 ranks and update-freq 2 after: {differ}")
    records = lambda run: [json.loads(l) for l in open(os.path.join(run, "metrics.jsonl"))]
    key = lambda x: (x["step"], x.get("loss"), x.get("grad_norm"), x.get("valid_loss"))
    check([key(x) for x in records(one)] == [key(x) for x in records(two)],
          "the same records (losses, gradient norms, validations) from 1 rank and 2 ranks")
    overlap = [x["overlap"] for x in records(two) if "overlap" in x]
    check(len(overlap) > 10 and sum(overlap) / len(overlap) > 0.5,
          f"most gradient buckets start their all-reduce during backward: {overlap}")
    series = [[json.loads(l) for l in open(os.path.join(run, "curvature.jsonl"))] for run in (one, two)]
    close = lambda x, y, tol=1e-4: abs(x - y) <= tol * max(abs(x), abs(y))
    # At update 0 the preconditioner holds only the probe gradient's squares (P^-1 spans ~1e5):
    # there the summation order moves lambda_1(P^-1 H) by 2.4e-5 (Xeon) to 2.8e-4 (EPYC), relative.
    check([x["step"] for x in series[0]] == [x["step"] for x in series[1]] and len(series[0]) > 3 and
          all(close(a["lambda_max"], b["lambda_max"]) and
              close(a["preconditioned_lambda_max"], b["preconditioned_lambda_max"], 1e-3 if a["step"] == 0 else 1e-4)
              for a, b in zip(series[0], series[1])),
          f"the curvature series of 2 ranks against 1 (float32 sums in another order): {series}")
    saved = torch.load(os.path.join(two, "checkpoints", "checkpoint_last.pt"))
    check("extra/rng/cpu/rank1" in saved, "rank 1's dropout stream is in the checkpoint")
    check(results[1][1] == "", f"only rank 0 logs: rank 1 said {results[1][1]!r}")

    # 2. torchrun starts the same job.
    tr = w("torchrun")
    r = subprocess.run(["torchrun", "--standalone", "--nproc-per-node", "2", "--no-python",
                        *argv(tr, "--max-steps", "5")], capture_output=True, text=True, timeout=120)
    check(r.returncode == 0, f"torchrun failed: {r.stderr[-2000:]}")
    ref5 = w("ref5")
    subprocess.run(argv(ref5, "--max-steps", "5", "--update-freq", "2"), check=True, capture_output=True)
    last = os.path.join("checkpoints", "checkpoint_last.pt")
    check(r.returncode == 0 and cli_setup.same_parameters(os.path.join(tr, last), os.path.join(ref5, last)),
          "torchrun's 2 ranks end where 1 rank x update-freq 2 does")
    # As two nodes: two torchrun agents meeting through the c10d rendezvous (the multi-node launch,
    # here both on 127.0.0.1), one process each.
    nodes, port = w("nodes"), cli_setup.free_port()
    agents = [subprocess.Popen(["torchrun", "--nnodes", "2", "--nproc-per-node", "1", "--node-rank", str(n),
                                "--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", "nodes",
                                "--no-python", *argv(nodes, "--max-steps", "5")],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) for n in range(2)]
    errs = [a.communicate(timeout=120)[1] for a in agents]
    check(all(a.returncode == 0 for a in agents) and
          cli_setup.same_parameters(os.path.join(nodes, last), os.path.join(ref5, last)),
          f"torchrun --nnodes 2 (c10d rendezvous) ends where 1 rank x update-freq 2 does: {[e[-800:] for e in errs]}")

    # 3. Kill rank 1 after update 10's checkpoint; relaunch; compare with an uninterrupted run.
    straight, killed = w("straight"), w("killed")
    limits = ("--max-steps", "24", "--save-interval-updates", "10")
    results = two_ranks(straight, *limits, dropout="0.3")
    check(all(rc == 0 for rc, _ in results), f"uninterrupted 2-rank run failed: {results}")
    port = cli_setup.free_port()
    procs = [subprocess.Popen(argv(killed, *limits, "--dist-timeout", "10", dropout="0.3"), env=env(r, 2, port),
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) for r in range(2)]
    marker = os.path.join(killed, "checkpoints", "checkpoint_1_10.pt")
    while not os.path.exists(marker) and procs[0].poll() is None:
        time.sleep(0.005)
    procs[1].send_signal(signal.SIGKILL)
    start = time.time()
    try:
        err0 = procs[0].communicate(timeout=60)[1]
    except subprocess.TimeoutExpired:
        procs[0].kill()
        err0 = "(hung)"
    procs[1].wait()
    took = time.time() - start
    check(procs[0].returncode == 2 and "lost rank 1" in err0 and took < 20,
          f"rank 0 after rank 1's SIGKILL: exit {procs[0].returncode} after {took:.1f} s: {err0[-600:]}")
    results = two_ranks(killed, *limits, dropout="0.3")
    check(all(rc == 0 for rc, _ in results) and "resuming at update" in results[0][1],
          f"relaunch did not resume: {results}")
    check(cli_setup.same_parameters(os.path.join(straight, last), os.path.join(killed, last)),
          "kill + relaunch ends bit-identical to the uninterrupted 2-rank run (dropout on)")
    # torchrun --max-restarts: the agent sees the killed worker, stops the other and starts both
    # again (TORCHELASTIC_RESTART_COUNT 1), which resume by themselves.
    elastic = w("elastic")
    agent = subprocess.Popen(["torchrun", "--standalone", "--nproc-per-node", "2", "--max-restarts", "1",
                              "--no-python", *argv(elastic, *limits, dropout="0.3")],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    marker = os.path.join(elastic, "checkpoints", "checkpoint_1_10.pt")
    while not os.path.exists(marker) and agent.poll() is None:
        time.sleep(0.005)
    workers = subprocess.run(["pgrep", "-P", str(agent.pid)], capture_output=True, text=True).stdout.split()
    check(len(workers) == 2, f"torchrun's two workers: {workers}")
    if workers:
        os.kill(int(max(workers, key=int)), signal.SIGKILL)
    err = agent.communicate(timeout=120)[1]
    check(agent.returncode == 0 and "resuming at update" in err and
          cli_setup.same_parameters(os.path.join(straight, last), os.path.join(elastic, last)),
          f"torchrun --max-restarts 1 after a worker's SIGKILL ends bit-identical to the uninterrupted run: "
          f"{agent.returncode} {err[-1500:]}")

    # --warmup-gate: rank 0's decision for both ranks, as 1 rank x update-freq 2 decides.
    gated = ("--lr", "1e-2", "--lr-schedule", "constant", "--max-steps", "20", "--warmup-steps", "4")
    gate_of = lambda run: json.load(open(os.path.join(run, "gate.json")))
    drop = None
    for name, threshold in (("gate-none", "50"), ("gate-ramp", None)):
        if threshold is None:
            check(drop is not None and drop > 0, f"the loss fell over the probe ({drop}): the ramp case needs it")
            threshold = repr(drop / 2)
        single, pair = w(name + "-1"), w(name + "-2")
        r = subprocess.run(argv(single, *gated, "--warmup-gate", threshold, "--update-freq", "2"),
                           capture_output=True, text=True)
        results = two_ranks(pair, *gated, "--warmup-gate", threshold)
        check(r.returncode == 0 and all(rc == 0 for rc, _ in results), f"{name}: {r.stderr[-500:]} {results}")
        if r.returncode != 0 or any(rc for rc, _ in results):
            continue
        one_gate, two_gate = gate_of(single), gate_of(pair)
        drop = one_gate["loss_drop"]
        check({k: v for k, v in one_gate.items() if k != "seconds"} == {k: v for k, v in two_gate.items() if k != "seconds"}
              and one_gate["decision"] == ("none" if name == "gate-none" else "ramp"),
              f"{name}: gate.json of 2 ranks against 1 x update-freq 2: {two_gate} vs {one_gate}")
        check([key(x) for x in records(single)] == [key(x) for x in records(pair)] and len(records(pair)) > 20,
              f"{name}: the gated run's records, 2 ranks against 1 x update-freq 2")

    # 4. Launch errors: one line, non-zero, within the timeout.
    quick = ("--max-steps", "2", "--dist-timeout", "3")
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        [(rc, err)] = launch([(argv(w("busy"), *quick), env(0, 2, port))], timeout=60)
        check(rc == 2 and f"MASTER_PORT={port}" in err and "in use" in err, f"a port in use: {rc} {err}")
    [(rc, err)] = launch([(argv(w("alone"), *quick), env(0, 2, cli_setup.free_port()))], timeout=60)
    check(rc == 2 and "rank 1 of 2 did not join" in err, f"a missing rank: {rc} {err}")
    port = cli_setup.free_port()
    results = launch([(argv(w("sizes"), *quick), env(0, 2, port)), (argv(w("sizes"), *quick), env(1, 3, port))],
                     timeout=60)
    check(all(rc == 2 for rc, _ in results) and "WORLD_SIZE=3 but rank 0 has WORLD_SIZE=2" in results[1][1],
          f"another WORLD_SIZE: {results}")
    port = cli_setup.free_port()
    results = launch([(argv(w("lrs"), *quick), env(0, 2, port)),
                      (argv(w("lrs"), *quick, "--lr", "2e-3"), env(1, 2, port))], timeout=60)
    check(all(rc == 2 and "rank 1 runs another job than rank 0: /config/schedule/lr is 0.001 on rank 0 but 0.002 on rank 1" in err for rc, err in results),
          f"another --lr on rank 1: {results}")
    port = cli_setup.free_port()
    results = launch([(argv(w("twice"), "--max-steps", "60", "--dist-timeout", "20"), env(r, 2, port))
                      for r in (0, 1, 1)], timeout=120)  # long enough for the third process to arrive
    check(sorted(rc for rc, _ in results) == [0, 0, 2] and
          sum("rank 1 was started twice" in err for _, err in results) == 1, f"a rank started twice: {results}")
    [(rc, err)] = launch([(argv(w("bad"), *quick), env(0, 2, cli_setup.free_port(), RANK="2"))], timeout=60)
    check(rc == 2 and "RANK=2" in err, f"RANK outside WORLD_SIZE: {rc} {err}")

    # 5. One writer per folder; a complete run is left alone; a stop inside an epoch is recorded.
    busy_dir = w("busy_dir")
    holder = subprocess.Popen(argv(busy_dir, "--max-steps", "100000"), stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    while not os.path.exists(os.path.join(busy_dir, "config.json")) and holder.poll() is None:
        time.sleep(0.01)
    r = subprocess.run(argv(busy_dir, "--max-steps", "3"), capture_output=True, text=True)
    holder.kill()
    holder.wait()
    check(r.returncode == 2 and f"is in use by another normlab process (pid {holder.pid})" in r.stderr,
          f"a second train into a folder in use: {r.returncode} {r.stderr}")
    r = subprocess.run(argv(busy_dir, "--max-steps", "1"), capture_output=True, text=True)
    check(r.returncode == 0, f"the lock of a killed process blocks: {r.stderr}")
    limited = w("limited")
    r = subprocess.run(argv(limited, "--max-steps", "3", "--log-interval", "2"), capture_output=True, text=True)
    recs = records(limited)
    check(r.returncode == 0 and [x.get("step") for x in recs] == [2, 3, 3] and "loss" in recs[1] and
          recs[2].get("mid_epoch") and "valid_loss" in recs[2],
          f"the last training record and a validation at a mid-epoch stop: {recs}")
    files = [os.path.join(limited, f) for f in ("metrics.jsonl", "config.json", "train.log", last)]
    before = [digest(f) for f in files]
    r = subprocess.run(argv(limited, "--max-steps", "3", "--log-interval", "2"), capture_output=True, text=True)
    check(r.returncode == 0 and "is complete" in r.stderr and before == [digest(f) for f in files] and
          r.stderr.count("\n") == 1,
          f"a complete run started again changed something: {r.returncode} {r.stderr}")
    r = subprocess.run(argv(limited, "--max-steps", "5", "--log-interval", "10"), capture_output=True, text=True)
    recs = records(limited)
    check(r.returncode == 0 and [x["step"] for x in recs if "valid_loss" in x] == [3, 5],
          f"a larger limit continues, keeping the mid-epoch validation: {recs}")
    # The analysis commands lock OUT the same way: a folder held (here by this script's flock,
    # the pid in .lock) is refused before any work.
    held = w("held")
    os.makedirs(held)
    with open(os.path.join(held, ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        lock.write(f"{os.getpid()}\n")
        lock.flush()
        for cmd in (["hessian", "--data", prefix], ["probe"], ["perturb"]):
            r = subprocess.run([args.normlab, *cmd, "--out", held], capture_output=True, text=True)
            check(r.returncode == 2 and f"{held} is in use by another normlab process (pid {os.getpid()})" in r.stderr,
                  f"{cmd[0]} into a folder in use: {r.returncode} {r.stderr}")
    return check.finish()


if __name__ == "__main__":
    sys.exit(main())
