#!/usr/bin/env python3
"""`normlab run` and `normlab report` end to end.

1. Grid expansion: `normlab run --dry-run` on a recipe with grids, global and per-cell scale
   overrides lists exactly the cells itertools.product gives over the sorted grid keys (with
   Python's own reading of the TOML and of the override rules of docs/recipes.md), with the
   option values on their command lines.
2. Every recipe in recipes/ parses and expands at every scale (--dry-run), and its synthetic task
   at that scale holds the largest vocabulary its cells train on it.
3. recipes/demo.toml at the smoke scale, SIGKILLed while its second cell runs and run again:
   the finished first cell is not run again (cell.json bytes and mtime untouched, "skipped" on
   stderr), the interrupted cell resumes and every cell ends ok or diverged; a third run runs
   nothing. Then `normlab report` draws its figures (valid PNG and SVG) and tables and gives a
   verdict line per claim; summary.csv has a row per cell with the status in cell.json."""
import fnmatch
import glob
import itertools
import json
import os
import signal
import subprocess
import sys
import time
import tomllib
import xml.etree.ElementTree as ET

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import cli_setup  # noqa: E402

GRID_RECIPE = """
title = "grid test"
[defaults.train]
train = "{train}"
valid = "{valid}"
max-epochs = 1
lr = 0.5

[[cells]]
name = "a"
options = { scheme = "post-ln", max-epochs = 3 }
grid = { optimizer = ["adam", "sgd"], lr = [5e-4, 1e-3, 2e-3], warmup-steps = [0, 10], encoder-layers = [1, 2] }
scale.smoke = { lr = [1e-3, 3e-3], fail-on-divergence = true }

[[cells]]
name = "b"
grid = { seed = [1, 2, 3], max-tokens = [100, 200] }

[[cells]]
name = "c"
command = "train"
options = { nesterov = false, clip-norm = 1 }

[scale.smoke.train]
max-epochs = 2
encoder-layers = [3, 4, 5]
seed = 7
clip-norm = 0.5
"""


def fmt(v):
    """How a TOML value appears on the command line and in cell names (docs/recipes.md)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    return repr(v) if isinstance(v, float) else str(v)


def cell_name(cell):
    """A cell's name: its table's, then "_KEY=VALUE" per grid key in sorted order."""
    return cell["table"] + "".join(f"_{k}={fmt(cell['point'][k])}" for k in sorted(cell["point"]))


def apply_set(cells, spec):
    """docs/recipes.md's `run --set [CELLS:]KEY=VALUE` on the expanded cells: CELLS a glob over
    cell names (the option added where missing), none: the cells that have KEY; true a flag, false
    left out. Where KEY is a selected cell's grid key, VALUE lists the grid's values: the selected
    cells that differ only in KEY become one cell per value where the first of them was."""
    glob, colon, rest = spec.partition(":")
    if not colon or "=" not in rest:
        glob, rest = "", spec
    key, _, value = rest.partition("=")
    typed = lambda v: {"true": True, "false": False}.get(v, v)  # noqa: E731
    out, groups = [], set()
    for cell in cells:
        if not (fnmatch.fnmatchcase(cell_name(cell), glob) if glob else key in cell["opts"]):
            out.append(cell)
        elif key not in cell["point"]:
            cell["opts"][key] = typed(value)
            out.append(cell)
        else:
            group = (cell["table"], sorted((k, fmt(v)) for k, v in cell["point"].items() if k != key))
            if repr(group) in groups:
                continue
            groups.add(repr(group))
            for v in value.split(","):
                out.append({**cell, "point": {**cell["point"], key: v}, "opts": {**cell["opts"], key: typed(v)}})
    return out


def expected_cells(recipe, scale, data, sets=()):
    """Python's reading of docs/recipes.md's rules: defaults < cell options < [scale.S.CMD] <
    the cell's scale.S; a scalar sets an option (and ends a grid over it), a list replaces the
    grid values of a key the cell grids over; grid keys sorted, the last varying fastest; then
    the --set overrides `sets` in order."""
    cells = []
    for cell in recipe["cells"]:
        cmd = cell.get("command", "train")
        opts = dict(recipe.get("defaults", {}).get(cmd, {}))
        opts.update(cell.get("options", {}))
        grid = dict(cell.get("grid", {}))
        for layer in (recipe.get("scale", {}).get(scale, {}).get(cmd, {}), cell.get("scale", {}).get(scale, {})):
            for k, v in layer.items():
                if isinstance(v, list):
                    if k in grid:
                        grid[k] = v
                else:
                    opts[k] = v
                    grid.pop(k, None)
        for k in grid:
            opts.pop(k, None)
        keys = sorted(grid)
        for values in itertools.product(*(grid[k] for k in keys)):
            point = dict(zip(keys, values))
            cells.append({"table": cell["name"], "cmd": cmd, "point": point, "opts": dict(opts, **point)})
    for spec in sets:
        cells = apply_set(cells, spec)
    out = []
    for cell in cells:
        args = [cell["cmd"]]
        for k in sorted(cell["opts"]):
            v = cell["opts"][k]
            if v is False:
                continue
            args.append("--" + k)
            if v is not True:
                args.append(fmt(v).replace("{train}", data + "/train").replace("{valid}", data + "/valid"))
        out.append((cell_name(cell), args))
    return out


def text_data(recipes, path):
    """A recipe without a synthetic task reads the shared English text (recipes/lm_*.toml): --data."""
    if "synth" in tomllib.load(open(path, "rb")):
        return []
    return ["--data", os.path.join(recipes, "..", "..", "shared", "data", "lm")]


def vocab_fits_synthetic(normlab, path, scale, dry_run, w, check):
    """Without data options a recipe runs on its synthetic task: generate that task as the recipe
    sets it at this scale ([synth] < [scale.S.synth]) and train the largest vocabulary any cell
    trains on it (`--vocab-size` of the cells reading DIR/data/train), so that SentencePiece's
    limit (distinct pieces the text allows) fails here and not at the scale's first cell."""
    recipe = tomllib.load(open(path, "rb"))
    synth = {**recipe.get("synth", {}), **recipe.get("scale", {}).get(scale, {}).get("synth", {})}
    sizes = [int(argv.split("--vocab-size ")[1].split()[0]) for argv in dry_run.splitlines()
             if "--vocab-size " in argv and "/data/train" in argv]
    if not sizes:
        return
    what = f"{os.path.basename(path)} at {scale}: the synthetic task"
    options = [a for k, v in sorted(synth.items()) if k not in ("valid", "test") for a in (f"--{k}", str(v))]
    task = w("task_" + "_".join(options).replace("-", ""))  # several recipes share a task
    if not os.path.exists(task):
        r = subprocess.run([normlab, "synth", "--out", task, "--valid", "1", "--test", "1"] + options,
                           capture_output=True, text=True)
        check(r.returncode == 0, f"{what}: {r.stderr.strip()}")
    r = subprocess.run([normlab, "bpe", "train", "--train", os.path.join(task, "train"), "--src", "src",
                        "--tgt", "tgt", "--vocab-size", str(max(sizes)), "--out", w("vocab_spm")],
                       capture_output=True, text=True)
    check(r.returncode == 0, f"{what} cannot hold {max(sizes)} pieces: {r.stderr.strip()}")


def main():
    args, w = cli_setup.start("recipes")
    check = cli_setup.Checks()

    # 1. grid expansion against itertools.product
    with open(w("grid.toml"), "w") as f:
        f.write(GRID_RECIPE)
    recipe = tomllib.loads(GRID_RECIPE)
    for scale in ("smoke", "cpu"):
        out = w(f"grid_{scale}")
        r = subprocess.run([args.normlab, "run", w("grid.toml"), "--out", out, "--scale", scale, "--data", w("d"),
                            "--dry-run"], capture_output=True, text=True)
        check(r.returncode == 0, f"dry run {scale}: {r.stderr}")
        got = [(l.split("\t")[0], l.split("\t")[1].split(" ")) for l in r.stdout.splitlines()]
        want = []
        for name, argv in expected_cells(recipe, scale, w("d")):
            want.append((name, argv + ["--out", os.path.join(out, "cells", name)]))
        check(got == want, f"grid at {scale}: {len(got)} cells, expected {len(want)}; first difference: " +
              str(next(((g, e) for g, e in zip(got, want) if g != e), None)))
        check(not os.path.exists(out), "--dry-run writes nothing")
    check(len(expected_cells(recipe, "smoke", "")) == 3 * 2 * 2 * 2 + 2 + 1, "smoke grid size")

    # 1b. --set overrides: a glob adds or replaces, no glob replaces where the option is, true is a
    # flag, false leaves it out, a later one wins; refused: no cell, an unknown option, a bad grid.
    sets = ["a_*:max-epochs=9", "clip-norm=2", "c:nesterov=true", "b_*:lr=0.25", "a_*optimizer=sgd*:seed=false",
            "c:clip-norm=3"]
    out = w("grid_set")
    r = subprocess.run([args.normlab, "run", w("grid.toml"), "--out", out, "--scale", "smoke", "--data", w("d"),
                        "--dry-run"] + [a for s in sets for a in ("--set", s)], capture_output=True, text=True)
    got = [(l.split("\t")[0], l.split("\t")[1].split(" ")) for l in r.stdout.splitlines()]
    want = [(name, argv + ["--out", os.path.join(out, "cells", name)])
            for name, argv in expected_cells(recipe, "smoke", w("d"), sets)]
    check(r.returncode == 0 and got == want and got != [(n, a) for n, a in expected_cells(recipe, "smoke", w("d"))],
          f"--set: {r.stderr.strip()}; first difference: {next(((g, e) for g, e in zip(got, want) if g != e), None)}")
    # run.json records the specs (one cell of a 1/100 shard, failing at once on the missing data).
    subprocess.run([args.normlab, "run", w("grid.toml"), "--out", out, "--scale", "smoke", "--data", w("d"),
                    "--shard", "1/100"] + [a for s in sets for a in ("--set", s)], capture_output=True, text=True)
    run_json = json.load(open(os.path.join(out, "run.json")))
    check(run_json.get("overrides") == sets and run_json["cells"][0]["argv"][1:] == want[0][1][1:],
          f"run.json: overrides {run_json.get('overrides')}, first argv {run_json['cells'][0]['argv']}")
    # A grid key's VALUE lists the grid: whole grids, one value, and part of one (a glob on another
    # key's value), each group where its first cell was.
    grid_sets = ["a_*:lr=0.1,0.2,0.3", "max-tokens=50", "b_*:max-tokens=300,400",
                 "a_encoder-layers=4_*:warmup-steps=5", "c:lr=0.7"]
    r = subprocess.run([args.normlab, "run", w("grid.toml"), "--out", out, "--scale", "smoke", "--data", w("d"),
                        "--dry-run"] + [a for s in grid_sets for a in ("--set", s)], capture_output=True, text=True)
    got = [(l.split("\t")[0], l.split("\t")[1].split(" ")) for l in r.stdout.splitlines()]
    want = [(name, argv + ["--out", os.path.join(out, "cells", name)])
            for name, argv in expected_cells(recipe, "smoke", w("d"), grid_sets)]
    check(r.returncode == 0 and got == want and len(got) == 3 * 2 * (2 + 2 + 1) + 2 + 1,
          f"--set on grids: {r.stderr.strip()}; {len(got)} cells, expected {len(want)}; first difference: "
          f"{next(((g, e) for g, e in zip(got, want) if g != e), None)}")
    for spec, needle in (("a_*:lr=1,,2", "grid value '' of --lr"), ("z*:lr=1", "no cell's name matches 'z*'"),
                         ("a_*warmup-steps=0:warmup-steps=10", "two cells would be named 'a_encoder-layers=3_"),
                         ("momentum=1", "no cell has --momentum"), ("b_*:bogus=1", "train has no option --bogus"),
                         ("lr", "expected [CELLS:]KEY=VALUE")):
        r = subprocess.run([args.normlab, "run", w("grid.toml"), "--out", out, "--scale", "smoke", "--data", w("d"),
                            "--dry-run", "--set", spec], capture_output=True, text=True)
        check(r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and f"--set {spec}: " in r.stderr
              and needle in r.stderr, f"--set {spec}: exit {r.returncode}, {r.stderr!r}")

    # 2. every shipped recipe at every scale
    for path in sorted(glob.glob(os.path.join(args.recipes, "*.toml"))):
        for scale in ("smoke", "cpu", "paper"):
            r = subprocess.run([args.normlab, "run", path, "--out", w("dry"), "--scale", scale, "--dry-run",
                                *text_data(args.recipes, path)], capture_output=True, text=True)
            check(r.returncode == 0 and r.stdout, f"{os.path.basename(path)} at {scale}: {r.stderr.strip()}")
            vocab_fits_synthetic(args.normlab, path, scale, r.stdout, w, check)

    # 3. the demo recipe at the smoke scale, killed and resumed
    demo = os.path.join(args.recipes, "demo.toml")
    out = w("demo")
    cmd = [args.normlab, "run", demo, "--out", out, "--scale", "smoke", "--threads", "1", "--device", "cpu"]
    start = time.time()
    names = [l.split("\t")[0] for l in subprocess.run(cmd + ["--dry-run"], capture_output=True, text=True)
             .stdout.splitlines()]
    check(len(names) >= 3, f"demo cells: {names}")
    first, second = names[0], names[1]
    p = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
    # Kill once the second cell has logged a training record (it is mid-run then).
    while p.poll() is None and not os.path.exists(os.path.join(out, "cells", second, "metrics.jsonl")):
        time.sleep(0.05)
    killed = p.poll() is None
    p.send_signal(signal.SIGKILL)
    p.wait()
    check(killed, "the run was still going when killed")
    first_json = os.path.join(out, "cells", first, "cell.json")
    check(os.path.exists(first_json), "the first cell finished before the kill")
    check(not os.path.exists(os.path.join(out, "cells", second, "cell.json")), "the second cell was interrupted")
    before = (os.stat(first_json).st_mtime_ns, open(first_json, "rb").read())
    time.sleep(1.0)  # the killed runner's child must not outlive it (PR_SET_PDEATHSIG)
    ckpt = os.path.join(out, "cells", second, "metrics.jsonl")
    size = os.path.getsize(ckpt)
    time.sleep(1.0)
    check(os.path.getsize(ckpt) == size, "no orphan keeps training after the runner was killed")

    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    check(r.returncode == 0, f"resumed run: {r.stderr[-800:]}")
    check(f"{first}: ok before, skipped" in r.stderr or f"{first}: diverged before, skipped" in r.stderr,
          "the finished cell is skipped")
    check((os.stat(first_json).st_mtime_ns, open(first_json, "rb").read()) == before, "first cell.json untouched")
    second_log = open(os.path.join(out, "cells", second, "cell.log")).read()
    check(second_log.count("# /proc/self/exe ") >= 2, "the interrupted cell ran twice (appended log)")
    stamps = {n: os.stat(os.path.join(out, "cells", n, "cell.json")).st_mtime_ns for n in names}
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    check(r.returncode == 0 and r.stderr.count("before, skipped") == len(names), "a third run runs nothing")
    check(stamps == {n: os.stat(os.path.join(out, "cells", n, "cell.json")).st_mtime_ns for n in names},
          "no cell.json rewritten by the third run")
    statuses = {}
    for n in names:
        c = json.load(open(os.path.join(out, "cells", n, "cell.json")))
        statuses[n] = c["status"]
        check(c["status"] in ("ok", "diverged") and c["exit_code"] == 0, f"{n}: {c['status']} {c['exit_code']}")
        check(c["argv"][0] == c["command"] and os.path.join(out, "cells", n) in c["argv"], f"{n} argv")
    rows = [l.split(",") for l in open(os.path.join(out, "summary.csv")).read().splitlines()]
    check(rows[0][:5] == ["cell", "command", "status", "exit_code", "wall_s"], f"summary header {rows[0]}")
    check({r[0]: r[2] for r in rows[1:]} == statuses, "summary.csv statuses = cell.json statuses")

    r = subprocess.run([args.normlab, "report", out], capture_output=True, text=True, timeout=300)
    check(r.returncode == 0, f"report: {r.stderr}")
    rep = json.load(open(os.path.join(out, "report", "report.json")))["sources"][0]
    figs = {f["name"] for f in rep.get("figures", [])}
    check(figs == {"valid-loss", "train-loss", "grad-norms-probe", "hidden-norms-probe"}, f"demo figures: {figs}")
    for f in rep.get("figures", []):
        png = os.path.join(out, "report", f["png"])
        check(open(png, "rb").read(8) == b"\x89PNG\r\n\x1a\n" and os.path.getsize(png) > 2000, f"{png} is a PNG")
        try:
            check(ET.parse(os.path.join(out, "report", f["svg"])).getroot().tag.endswith("svg"), f"{f['svg']}")
        except ET.ParseError as e:
            check.failures.append(f"{f['svg']}: {e}")
    md = open(os.path.join(out, "report", "REPORT.md")).read()
    n_claims = len(tomllib.load(open(demo, "rb"))["claims"])
    check(len(rep["claims"]) == n_claims and all(c["verdict"] in ("reproduced", "not reproduced", "inconclusive")
                                                 for c in rep["claims"]), "a verdict per claim")
    check("### Verdicts" in md and "| claim | paper | verdict | measured |" in md, "claims table")
    cells = {n: json.load(open(os.path.join(out, "cells", n, "cell.json"))) for n in names}
    precision = {n: c["argv"][c["argv"].index("--precision") + 1] if "--precision" in c["argv"] else "fp32"
                 for n, c in cells.items()}
    for n in names:  # auto as resolved by the cell (its config.json), shown as "auto: bf16|fp32"
        config = os.path.join(out, "cells", n, "config.json")
        if precision[n] == "auto" and os.path.exists(config):
            precision[n] = "auto: " + json.load(open(config))["precision"]
    check(all(f"| {n} | {cells[n]['command']} | {precision[n]} | {statuses[n]} |" in md for n in names),
          "cells table: a row per cell")
    # bf16 where the CPU multiplies bf16 faster than fp32, as `normlab info` says (the rule itself is
    # checked against /proc/cpuinfo in train.run_folder; docs/precision.md), else fp32.
    faster = json.loads(subprocess.run([args.normlab, "info", "--json", "--no-gemm"], capture_output=True, text=True,
                                       check=True).stdout)["cpu_bf16_faster"]
    check(precision["post-ln-warmup"] == ("auto: bf16" if faster else "auto: fp32") and precision["probe"] == "fp32",
          f"the demo trains in auto precision (bf16 faster: {faster}) and probes in fp32: {precision}")
    check(sum(l.startswith(("  reproduced", "  not reproduced", "  inconclusive")) for l in r.stderr.splitlines())
          == n_claims, "verdict lines on stderr")

    return check.finish(f"demo smoke run, resume and report took {time.time() - start:.1f} s")


if __name__ == "__main__":
    sys.exit(main())
