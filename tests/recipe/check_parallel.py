#!/usr/bin/env python3
"""`normlab run --jobs N` and `--shard K/N` on a recipe of tiny cells (docs/recipes.md#parallel-cells).

The recipe: four training cells (d 16, 1+1 layers, 2 epochs of a 300-pair synthetic task, dropout
on) and an `evaluate` cell that reads the second cell's checkpoint, so that it must wait for it.
1. --jobs 2 --threads 2 against --jobs 1 --threads 1 (every cell on one thread in both): every
   tensor of checkpoint_last.pt bit-identical (parameters, optimiser state, RNG streams; torch.equal)
   and the same position, the same metrics.jsonl records but for their timings, the same evaluate.json; two cells' start/end times (cell.json) overlap; the evaluate
   cell starts after the cell it reads has ended; summary.csv lists the cells in recipe order.
2. --shard 1/2 and --shard 2/2 started together into one DIR: each runs the cells i % 2 == K-1
   (disjoint, their union all five; the evaluate cell of shard 1 waits for shard 2's cell), the
   cells equal those of 1, summary.csv (whoever wrote it last) lists all five as ok, `normlab
   report` reads the union.
3. --shard 1/2 alone: the evaluate cell, whose input cell nobody runs, is skipped (not failed);
   summary.csv has "not run" rows for the others and `normlab report` still reads the cells that
   ran. Then --shard 2/2 while this test holds one of its cells' lock (DIR/locks/NAME/.lock): that
   cell is skipped with a line saying so, the other runs, exit 0.
4. --dry-run --shard 2/2 lists exactly the shard's cells; --cells GLOB (repeatable) the cells whose
   name matches one, with --shard of the shard's; a run with --cells runs just those (the others
   "not run" in summary.csv); a glob that matches no cell is refused in one line naming it.
5. A `ranks = 2` cell (two processes with torchrun's environment, docs/distributed.md) against a
   1-rank cell with update-freq 2 over the same batches, dropout 0, one thread per process (the
   runner gives each of the 2 ranks half of --threads 2): parameters and optimiser
   state bit-identical (the sum of two gradients is the same in either order), the same records
   but for timings; rank 1 logs to cell.rank1.log; cell.json says ranks 2."""
import csv
import fcntl
import json
import os
import subprocess
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import cli_setup  # noqa: E402

RECIPE = """
title = "parallel cells test"

[synth]
seed = 1
train = 300
valid = 40
test = 40

[defaults.train]
train = "{train}"
valid = "{valid}"
src = "{src}"
tgt = "{tgt}"
vocab-size = 200
d-model = 16
ffn-dim = 32
heads = 2
encoder-layers = 1
decoder-layers = 1
max-epochs = 2
log-interval = 2
dropout = 0.1
seed = 1

[[cells]]
name = "a"
grid = { lr = [0.001, 0.002, 0.003, 0.005] }

[[cells]]
name = "eval"
command = "evaluate"
options = { checkpoint = "{cells}/a_lr=0.002/checkpoints/checkpoint_last.pt", src = "{test}.{src}", ref = "{test}.{tgt}", beam = 1, max-len-a = 1, max-len-b = 5 }
"""
CELLS = ["a_lr=0.001", "a_lr=0.002", "a_lr=0.003", "a_lr=0.005", "eval"]
TRAIN = CELLS[:4]


def cell_json(out, name):
    return json.load(open(os.path.join(out, "cells", name, "cell.json")))


def checkpoint(out, name):
    """checkpoint_last.pt's tensors (parameters, optimiser state, RNG streams) and its position
    but for wall_s. The file's bytes differ: its configuration names the run's own paths."""
    state = torch.load(os.path.join(out, "cells", name, "checkpoints", "checkpoint_last.pt"))
    meta = json.loads(bytes(state.pop("__normlab_meta__").tolist()).decode())
    meta["position"].pop("wall_s", None)
    return state, meta["position"]


def records(out, name):
    """metrics.jsonl without its timings (wall_s, tokens_per_s)."""
    lines = open(os.path.join(out, "cells", name, "metrics.jsonl")).read().splitlines()
    return [{k: v for k, v in json.loads(l).items() if k not in ("wall_s", "tokens_per_s")} for l in lines if l]


def summary(out):
    with open(os.path.join(out, "summary.csv"), newline="") as f:
        return [(r["cell"], r["status"]) for r in csv.DictReader(f)]


def ran(stderr):
    """The cells a runner ran (its "NAME: ok (exit 0, ...)" lines)."""
    return {n for n in CELLS if f"] {n}: ok (exit 0" in stderr}


def same_cells(a, b, check, what):
    for n in TRAIN:
        (ta, pa), (tb, pb) = checkpoint(a, n), checkpoint(b, n)
        check(ta.keys() == tb.keys() and all(torch.equal(ta[k], tb[k]) for k in ta) and pa == pb,
              f"{what}: {n} checkpoint_last.pt")
        check(records(a, n) == records(b, n), f"{what}: {n} metrics.jsonl")
    ea, eb = (json.load(open(os.path.join(d, "cells", "eval", "evaluate.json"))) for d in (a, b))
    check(ea.get("bleu") == eb.get("bleu"), f"{what}: evaluate.json bleu {ea.get('bleu')} vs {eb.get('bleu')}")


def main():
    args, w = cli_setup.start()
    check = cli_setup.Checks()
    recipe = w("parallel.toml")
    open(recipe, "w").write(RECIPE)
    run = lambda out, *more: [args.normlab, "run", recipe, "--out", out, "--scale", "smoke", "--device", "cpu", *more]
    begin = time.time()

    # 1. --jobs 2 against --jobs 1
    one, two = w("jobs1"), w("jobs2")
    r1 = subprocess.run(run(one, "--jobs", "1", "--threads", "1"), capture_output=True, text=True, timeout=300)
    t1 = time.time() - begin
    r2 = subprocess.run(run(two, "--jobs", "2", "--threads", "2"), capture_output=True, text=True, timeout=300)
    t2 = time.time() - begin - t1
    check(r1.returncode == 0 and ran(r1.stderr) == set(CELLS), f"--jobs 1: {r1.stderr[-1500:]}")
    check(r2.returncode == 0 and ran(r2.stderr) == set(CELLS), f"--jobs 2: {r2.stderr[-1500:]}")
    if r1.returncode == 0 and r2.returncode == 0:
        same_cells(one, two, check, "--jobs 2 vs --jobs 1")
        cells = {n: cell_json(two, n) for n in CELLS}
        check(all(c["globals"] == ["--threads", "1", "--device", "cpu"] for c in cells.values()),
              f"--jobs 2 --threads 2: one thread per cell: {[c['globals'] for c in cells.values()]}")
        a, b = cells[CELLS[0]], cells[CELLS[1]]
        check(max(a["start_time"], b["start_time"]) < min(a["end_time"], b["end_time"]),
              f"the first two cells overlap: {a['start_time']}-{a['end_time']}, {b['start_time']}-{b['end_time']}")
        check(cells["eval"]["start_time"] >= cells["a_lr=0.002"]["end_time"], "eval starts after the cell it reads")
        check(summary(two) == [(n, "ok") for n in CELLS], f"summary.csv in recipe order: {summary(two)}")

    # 2. two shards at once into one DIR
    sh = w("shards")
    procs = [subprocess.Popen(run(sh, "--shard", f"{k}/2", "--threads", "1"), stderr=subprocess.PIPE, text=True)
             for k in (1, 2)]
    errs = [p.communicate(timeout=300)[1] for p in procs]
    check(all(p.returncode == 0 for p in procs), f"shards: {[p.returncode for p in procs]} {errs}")
    check(ran(errs[0]) == {CELLS[0], CELLS[2], CELLS[4]} and ran(errs[1]) == {CELLS[1], CELLS[3]},
          f"shard 1 ran {sorted(ran(errs[0]))}, shard 2 {sorted(ran(errs[1]))}")
    check(summary(sh) == [(n, "ok") for n in CELLS], f"the last summary.csv describes every cell: {summary(sh)}")
    if all(p.returncode == 0 for p in procs) and r1.returncode == 0:
        same_cells(one, sh, check, "two shards vs --jobs 1")
    rep = subprocess.run([args.normlab, "report", sh], capture_output=True, text=True, timeout=120)
    check(rep.returncode == 0, f"report of the shards: {rep.stderr[-800:]}")
    if rep.returncode == 0:
        got = {c["name"]: c["status"] for c in json.load(open(os.path.join(sh, "report", "report.json")))
               ["sources"][0]["cells"]}
        check(got == {n: "ok" for n in CELLS}, f"the report reads both shards' cells: {got}")

    # 3. one shard alone: a cell waiting for another shard's cell is skipped; a locked cell too
    alone = w("alone")
    r = subprocess.run(run(alone, "--shard", "1/2", "--threads", "1"), capture_output=True, text=True, timeout=300)
    check(r.returncode == 0 and ran(r.stderr) == {CELLS[0], CELLS[2]}, f"shard 1/2 alone: {r.stderr[-1500:]}")
    check("eval: needs cell a_lr=0.002, which has not run, skipped" in r.stderr, f"eval skipped: {r.stderr[-800:]}")
    check(summary(alone) == [(CELLS[0], "ok"), (CELLS[1], "not run"), (CELLS[2], "ok"), (CELLS[3], "not run"),
                             ("eval", "not run")], f"summary.csv of one shard: {summary(alone)}")
    with open(os.path.join(alone, "summary.csv"), newline="") as f:
        rows = {r["cell"]: r for r in csv.DictReader(f)}
    check(rows["eval"]["command"] == "evaluate" and rows[CELLS[3]]["lr"] == "0.005",
          f"a row not run still names its command and grid point: {rows['eval']}, {rows[CELLS[3]]}")
    rep = subprocess.run([args.normlab, "report", alone], capture_output=True, text=True, timeout=120)
    check(rep.returncode == 0, f"report with cells not run yet: {rep.stderr[-800:]}")
    lock_dir = os.path.join(alone, "locks", CELLS[3])
    os.makedirs(lock_dir, exist_ok=True)
    with open(os.path.join(lock_dir, ".lock"), "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        held.write(f"{os.getpid()}\n")
        held.flush()
        r = subprocess.run(run(alone, "--shard", "2/2", "--threads", "1"), capture_output=True, text=True,
                           timeout=300)
    check(r.returncode == 0 and ran(r.stderr) == {CELLS[1]}, f"shard 2/2 with a cell held: {r.stderr[-1500:]}")
    check(f"{CELLS[3]}: another runner has it, skipped" in r.stderr and f"(pid {os.getpid()})" in r.stderr,
          f"the held cell is skipped, naming the holder: {r.stderr[-800:]}")
    check(not os.path.exists(os.path.join(alone, "cells", CELLS[3], "cell.json")), "the held cell did not run")

    # 4. a shard's dry run
    r = subprocess.run(run(w("dry"), "--shard", "2/2", "--dry-run"), capture_output=True, text=True)
    check(r.returncode == 0 and [l.split("\t")[0] for l in r.stdout.splitlines()] == [CELLS[1], CELLS[3]],
          f"--dry-run --shard 2/2: {r.stdout!r} {r.stderr!r}")

    # 4b. --cells
    names = lambda r: [l.split("\t")[0] for l in r.stdout.splitlines()]
    r = subprocess.run(run(w("dry"), "--cells", "a_lr=0.00[13]", "--cells", "ev*", "--dry-run"),
                       capture_output=True, text=True)
    check(r.returncode == 0 and names(r) == [CELLS[0], CELLS[2], "eval"], f"--cells, two globs: {r.stdout!r} {r.stderr!r}")
    r = subprocess.run(run(w("dry"), "--cells", "a_*", "--shard", "2/2", "--dry-run"), capture_output=True, text=True)
    check(r.returncode == 0 and names(r) == [CELLS[1], CELLS[3]], f"--cells with --shard 2/2: {r.stdout!r} {r.stderr!r}")
    only = w("only")
    r = subprocess.run(run(only, "--cells", "a_lr=0.005", "--threads", "1"), capture_output=True, text=True, timeout=300)
    check(r.returncode == 0 and ran(r.stderr) == {CELLS[3]} and
          summary(only) == [(n, "ok" if n == CELLS[3] else "not run") for n in CELLS],
          f"a run with --cells: {r.stderr[-1500:]} {summary(only) if r.returncode == 0 else ''}")
    r = subprocess.run(run(w("dry"), "--cells", "b_*", "--dry-run"), capture_output=True, text=True)
    check(r.returncode != 0 and r.stdout == "" and len(r.stderr.strip().splitlines()) == 1 and
          "--cells 'b_*' matches no cell of" in r.stderr, f"--cells matching nothing: {r.stderr!r}")

    # 5. ranks = 2 against update-freq 2
    ranked = w("ranks")
    os.makedirs(ranked, exist_ok=True)
    recipe = RECIPE.split("[[cells]]")[0].replace("dropout = 0.1", "dropout = 0.0") + \
        '[[cells]]\nname = "two"\nranks = 2\n\n[[cells]]\nname = "one"\noptions = { update-freq = 2, threads = 1 }\n'
    path = os.path.join(ranked, "ranks.toml")
    open(path, "w").write(recipe)
    r = subprocess.run([args.normlab, "run", path, "--out", os.path.join(ranked, "out"), "--threads", "2"],
                       capture_output=True, text=True, timeout=300)
    check(r.returncode == 0, f"ranks recipe: {r.stderr[-1500:]}")
    if r.returncode == 0:
        out = os.path.join(ranked, "out")
        (ta, pa), (tb, pb) = checkpoint(out, "two"), checkpoint(out, "one")
        shared = [k for k in ta if k in tb and not k.startswith("rng/")]
        check(len(shared) > 20 and all(torch.equal(ta[k], tb[k]) for k in shared),
              f"ranks 2 vs update-freq 2: {[k for k in shared if not torch.equal(ta[k], tb[k])][:5]}")
        strip = lambda rs: [{k: v for k, v in x.items() if k not in ("sync_s", "overlap")} for x in rs]
        check(strip(records(out, "two")) == strip(records(out, "one")), "ranks 2 vs update-freq 2: metrics.jsonl")
        check(cell_json(out, "two")["ranks"] == 2 and
              os.path.exists(os.path.join(out, "cells", "two", "cell.rank1.log")), "cell.json ranks, rank 1's log")

    return check.finish(f"--jobs 1 {t1:.1f} s, --jobs 2 {t2:.1f} s, all {time.time() - begin:.1f} s")


if __name__ == "__main__":
    sys.exit(main())
