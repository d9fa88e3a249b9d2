#!/usr/bin/env python3
"""The paper recipes at the smoke scale, end to end, and their reports.

For each recipe named on the command line: `normlab run RECIPE --scale smoke` (no cell may
fail), then `normlab report`, then checks that
- the report holds the figures this recipe's cells must produce (valid PNG signature, SVG that
  parses as XML) and a verdict per claim (with the verdict lines on stderr);
- the numbers in its tables and figure data are those Python computes from the result files
  (independently of the report's readers): probe --sweep's slopes are the least-squares slopes
  of log(grad_norm) on log L and log C over sweep.csv's rows, the sweep figures' points the means
  over seeds; hessian --per-block's table and figure hold per_block.csv's lambda_max; the test-BLEU
  table holds evaluate.json's BLEU;
- claims whose rule Python can evaluate from the files get the verdict Python gives (Fig. 3's
  gradient growth, the Hessian report's lambda_max comparison, the perturb growth ratios).
ctest (`recipe.paper_recipes_smoke`) runs every paper recipe: xiong_fig2, xiong_fig3, xiong_fig4,
huang_table1, huang_fig2_3, huang_fig3c, huang_fig4b, schemes, schemes_2025, hessian_report and
advise_grid (with scripts/advise_confusion.py's table against the cells' own files), sharpness,
lr_sensitivity (scripts/lr_sensitivity.py against the cells' own records), optimizer_warmup,
lr_transfer_width (scripts/lr_transfer.py's best lrs against the cells' own records, mup = sp at the
base width, two verdicts recomputed), warmup_auto (scripts/warmup_auto.py's rows against the cells' own
records, each auto ramp's start against 38 / (lambda_0 lr); scripts/warmup_predictor.py runs) and dt_fixup (its frozen cell's trained parameters against the pretrained checkpoint, by torch.load; the authors' form without norms in its added layers, dt-fixup-postln with them).
`recipe.lm_recipes_smoke` runs the decoder-only lm_sharpness, lm_lr_sensitivity (lr_sensitivity's
checks) and lm_lr_transfer (lr_transfer_width's script check; mup = sp at its base width w1),
umup_alphas (each cell's recorded alphas, scripts/umup_alphas.py's best values and the claims against
the cells' own records) and the encoder-only xiong_fig5 (scripts/xiong_fig5.py's mean best accuracies
against the report's claims, its last validation losses against summary.csv), with
--data ../shared/data/lm (a recipe without a [synth] task reads that text)."""
import csv
import json
import math
import os
import re
import subprocess
import sys
import time
import tomllib
import xml.etree.ElementTree as ET

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import cli_setup  # noqa: E402

# Figures each recipe's smoke run must draw (figure names in report.json).
FIGURES = {
    "xiong_fig3": {"grad-norms-fig3", "hidden-norms-fig3", "hidden-norms-lemma2", "grad-norms-lemma2",
                   "sweep-layers-sweep", "sweep-d-sweep"},
    "huang_fig2_3": {"train-loss", "histogram-grad-post-ln-warmup", "histogram-update-post-ln-warmup",
                     "histogram-grad-post-ln-no-warmup", "histogram-update-post-ln-no-warmup",
                     "histogram-grad-t-fixup", "histogram-update-t-fixup", "ln-inputs-decoder-post-ln-warmup",
                     "ln-inputs-encoder-post-ln-warmup", "ln-inputs-decoder-post-ln-no-warmup",
                     "ln-inputs-encoder-post-ln-no-warmup"},
    "xiong_fig2": {"valid-loss", "train-loss"},
    "xiong_fig4": {"valid-loss", "train-loss"},
    "huang_fig3c": {"valid-loss", "train-loss"},
    "huang_fig4b": {"valid-loss", "train-loss"},
    "hessian_report": {"hessian-density", "hessian-blocks"},
    "huang_table1": {"valid-loss", "train-loss"},
    "schemes": {"valid-loss", "train-loss", "perturb-perturb_delta=sign", "perturb-perturb_delta=adam"},
    "advise_grid": {"valid-loss", "train-loss"},
    "dt_fixup": {"valid-loss", "train-loss"},
    "lr_sensitivity": {"valid-loss", "train-loss", "lr-grid", "lr-grid-nowarm", "lr-grid-warm",
                       "logits-nowarm_lr=0.01_scheme=post-ln",
                       "logits-nowarm-qk_lr=0.01_scheme=post-ln"},
    "lm_lr_sensitivity": {"valid-loss", "train-loss", "lr-grid", "lr-grid-nowarm", "lr-grid-w32",
                          "logits-nowarm_lr=0.01_scheme=pre-ln",
                          "logits-nowarm-qk_lr=0.01_scheme=pre-ln"},
    "lm_sharpness": {"valid-loss", "train-loss", "curvature-post-ln-nowarm", "curvature-post-ln-warm",
                     "curvature-pre-ln-nowarm", "curvature-gpt2-nowarm", "curvature-t-fixup-nowarm",
                     "curvature-admin-nowarm"},
    "xiong_fig5": {"valid-loss", "train-loss"},
    "warmup_auto": {"valid-loss", "train-loss", "warmup-auto_lr=0.01_scheme=post-ln_seed=1"},
    "warmup_auto_lm": {"valid-loss", "train-loss", "warmup-auto_lr=0.01_scheme=post-ln_seed=1",
                       "curvature-probe_lr=0.01_scheme=pre-ln_seed=1", "logits-probe_lr=0.01_scheme=pre-ln_seed=1"},
    "optimizer_warmup": {"valid-loss", "train-loss", "lr-grid"},
    "lr_transfer_width": {"valid-loss", "train-loss", "lr-grid"},
    "lm_lr_transfer": {"valid-loss", "train-loss", "lr-grid"},
    "umup_alphas": {"valid-loss", "train-loss"},
    "sharpness": {"valid-loss", "train-loss", "curvature-post-ln-nowarm", "curvature-post-ln-warm",
                  "curvature-pre-ln-nowarm", "curvature-t-fixup-nowarm", "curvature-admin-nowarm"},
    "schemes_2025": {"valid-loss", "train-loss", "grad-norms-probe", "hidden-norms-probe",
                     "ln-inputs-encoder-warm_scheme=peri-ln", "ln-inputs-encoder-warm_scheme=pre-ln"},
}


def rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def slope(xs, ys):
    """Least-squares slope of log y on log x."""
    lx = [math.log(x) for x in xs]
    ly = [math.log(y) for y in ys]
    mx, my = sum(lx) / len(lx), sum(ly) / len(ly)
    return sum((a - mx) * (b - my) for a, b in zip(lx, ly)) / sum((a - mx) ** 2 for a in lx)


def close(a, b, rel=2e-3):
    return abs(a - b) <= rel * max(abs(a), abs(b), 1e-12)


def transfer_key(c):
    """(parametrisation, scheme, warm, width), lr of an lr-transfer cell's name."""
    g = dict(kv.split("=", 1) for kv in c.split("_")[1:])
    return (g["parametrisation"], g["scheme"], int(g["warmup-steps"]) > 0, int(g["d-model"])), float(g["lr"])


def check_umup_alphas(root, out, cells, cell, check, claims, verdicts):
    """Each alpha cell's config.json carries its one alpha (the others absent: 1); scripts/umup_alphas.py's
    best value and gain per (alpha, width) against the cells' own records; the claims' verdicts."""
    def last_valid(c):
        v = [json.loads(l).get("valid_loss") for l in open(os.path.join(cell(c), "metrics.jsonl"))]
        return [x for x in v if x is not None][-1]

    loss = {}
    for c in cells:
        if c == "text":
            continue
        width, rest = c.split("-", 1)
        alphas = json.load(open(os.path.join(cell(c), "config.json")))["model"].get("umup_alphas")
        if rest == "default":
            check(alphas is None, f"umup_alphas: {c} records alphas {alphas}")
            loss[(width, None, 1.0)] = last_valid(c)
            continue
        key, value = c.split("_", 1)[1].split("=")
        name = key[len("umup-alpha-"):]
        field = {"ffn-act": "ffn_act", "attn-softmax": "attn_softmax", "res": "residual",
                 "res-attn-ratio": "residual_attn_ratio", "loss-softmax": "loss_softmax"}[name]
        check(alphas is not None and alphas[field] == float(value) and
              all(v == 1.0 for k, v in alphas.items() if k != field), f"umup_alphas: {c} records alphas {alphas}")
        loss[(width, name, float(value))] = last_valid(c)
    r = subprocess.run([sys.executable, os.path.join(root, "scripts", "umup_alphas.py"), out], capture_output=True,
                       text=True, timeout=60)
    check(r.returncode == 0, f"umup_alphas.py: {r.stderr[-400:]}")
    table = rows(os.path.join(out, "umup_alphas.csv")) if r.returncode == 0 else []
    names = {n for (_, n, _) in loss if n}
    widths = {w for (w, _, _) in loss}
    check(len(table) == len(names) * len(widths), f"umup_alphas.csv: {len(table)} rows")
    for t in table:
        sweep = {v: l for (w, n, v), l in loss.items() if w == t["width"] and n == t["alpha"]}
        sweep[1.0] = loss[(t["width"], None, 1.0)]
        best = min(sweep, key=sweep.get)
        check(float(t["best_value"]) == best and close(float(t["gain_on_default"]), sweep[1.0] - sweep[best], 1e-9),
              f"umup_alphas.csv {t['alpha']} {t['width']}: best {t['best_value']} vs {best}")
    for claim in claims:
        width = claim["rule"].split("(")[2].split("-")[0]
        swept = min(l for (w, n, _), l in loss.items() if w == width and n)
        want = verdict(swept > loss[(width, None, 1.0)] - 0.05)
        check(verdicts[claim["text"]] == want, f"umup_alphas: {width} claim {verdicts[claim['text']]}, Python says {want}")


def by_cell(by, c):
    key, lr = transfer_key(c)
    return by[key][lr]


def check_lr_transfer(root, out, cells, cell, check):
    """scripts/lr_transfer.py's best lr per configuration and width against each cell's own
    metrics.jsonl (last validation record; +inf when diverged). Returns {key: {lr: final loss}}."""
    script = os.path.join(root, "scripts", "lr_transfer.py")
    r = subprocess.run([sys.executable, script, out], capture_output=True, text=True, timeout=60)
    check(r.returncode == 0, f"lr_transfer.py: {r.stderr[-400:]}")
    table = rows(os.path.join(out, "lr_transfer.csv")) if r.returncode == 0 else []

    def last_valid(c):
        recs = [json.loads(l) for l in open(os.path.join(cell(c), "metrics.jsonl"))]
        if any(x.get("event") == "diverged" for x in recs):
            return math.inf
        v = [x["valid_loss"] for x in recs if "valid_loss" in x]
        return v[-1] if v and v[-1] is not None else math.inf
    by = {}
    for c in cells:
        if c.startswith("w"):
            key, lr = transfer_key(c)
            by.setdefault(key, {})[lr] = last_valid(c)
    best = {k: min(v, key=v.get) for k, v in by.items()}
    check(len(table) == len([k for k in by if k[2]]), f"lr_transfer.csv rows {len(table)}")
    for t in table:
        for warm, column in ((True, "best_lr_warm"), (False, "best_lr_nowarm")):
            key = (t["parametrisation"], t["scheme"], warm, int(t["width"]))
            if key in by:
                check(close(float(t[column]), best[key], 1e-9), f"lr_transfer {t} {column}: Python says {best[key]}")
        nowarm = (t["parametrisation"], t["scheme"], False, int(t["width"]))
        if nowarm in by:
            lr = float(t["best_lr_warm"])
            cost = by[nowarm][lr] - by[(t["parametrisation"], t["scheme"], True, int(t["width"]))][lr]
            check(close(float(t["warmup_cost_at_best"]), cost, 1e-6), f"lr_transfer {t}: cost {cost}")
    return by


def number(text):
    try:
        return float(text)
    except ValueError:
        return text


def table_numbers(md, header, first_cell):
    """The fields (numbers as floats) of the row `| first_cell | ...` of the markdown table whose
    header line starts with `header`."""
    lines = md.splitlines()
    for i, line in enumerate(lines):
        if not line.startswith(header):
            continue
        for row in lines[i + 2:]:
            if not row.startswith("|"):
                break
            if row.startswith("| " + first_cell + " |"):
                return [number(c.strip()) for c in row.strip("|").split("|")]
    return None


def dat_blocks(path):
    """A figure's .dat file: {series title: [(x, y), ...]}."""
    blocks, title = {}, None
    for line in open(path):
        line = line.strip()
        if line.startswith("# "):
            title = line[2:]
            blocks[title] = []
        elif line and title is not None:
            x, y = map(float, line.split())
            blocks[title].append((x, y))
    return blocks


def verdict(truth):
    return "reproduced" if truth else "not reproduced"


def main():
    args, _ = cli_setup.start("recipes", add_arguments=lambda ap: ap.add_argument("names", nargs="+"))
    check = cli_setup.Checks()

    for name in args.names:
        path = os.path.join(args.recipes, name + ".toml")
        out = os.path.join(args.workdir, name)
        start = time.time()
        data = [] if "synth" in tomllib.load(open(path, "rb")) else [
            "--data", os.path.join(args.recipes, "..", "..", "shared", "data", "lm")]  # the text recipes
        r = subprocess.run([args.normlab, "run", path, "--out", out, "--scale", "smoke", "--threads", "1",
                            "--device", "cpu", *data], capture_output=True, text=True, timeout=600)
        wall = time.time() - start
        check(r.returncode == 0, f"{name}: run exit {r.returncode}: {r.stderr[-600:]}")
        cells = {}
        for line in rows(os.path.join(out, "summary.csv")):
            cells[line["cell"]] = line["status"]
        check(cells and all(s in ("ok", "diverged") for s in cells.values()), f"{name}: cell statuses {cells}")
        r = subprocess.run([args.normlab, "report", out], capture_output=True, text=True, timeout=300)
        check(r.returncode == 0, f"{name}: report: {r.stderr[-600:]}")
        if r.returncode != 0:
            continue
        rep = json.load(open(os.path.join(out, "report", "report.json")))["sources"][0]
        md = open(os.path.join(out, "report", "REPORT.md")).read()
        figs = {f["name"] for f in rep.get("figures", [])}
        check(FIGURES[name] <= figs, f"{name}: missing figures {sorted(FIGURES[name] - figs)}")
        for f in rep.get("figures", []):
            png = os.path.join(out, "report", f["png"])
            check(open(png, "rb").read(8) == b"\x89PNG\r\n\x1a\n" and os.path.getsize(png) > 2000, f"{png} is a PNG")
            try:
                check(ET.parse(os.path.join(out, "report", f["svg"])).getroot().tag.endswith("svg"), f["svg"])
            except ET.ParseError as e:
                check.failures.append(f"{f['svg']}: {e}")
        claims = tomllib.load(open(path, "rb")).get("claims", [])
        check(len(rep["claims"]) == len(claims), f"{name}: a verdict per claim")
        verdicts = {c["text"]: c["verdict"] for c in rep["claims"]}
        check(sum(l.startswith(("  reproduced", "  not reproduced", "  inconclusive")) for l in r.stderr.splitlines())
              == len(claims), f"{name}: verdict lines on stderr")
        cell = lambda c: os.path.join(out, "cells", c)

        if name == "xiong_fig3":
            # Theorem 1's slopes, recomputed from sweep.csv, and the figure's means over seeds.
            sweep = rows(os.path.join(cell("sweep"), "sweep.csv"))
            fits = json.load(open(os.path.join(cell("sweep"), "sweep.json")))
            for scheme, fit in fits.items():
                d0, l0 = fit["d_model_of_layer_sweep"], fit["layers_of_d_sweep"]
                by_l = [(int(x["layers"]), float(x["grad_norm"])) for x in sweep
                        if x["scheme"] == scheme and int(x["d_model"]) == d0]
                by_d = [(int(x["d_model"]), float(x["grad_norm"])) for x in sweep
                        if x["scheme"] == scheme and int(x["layers"]) == l0]
                s_l, s_d = slope(*zip(*by_l)), slope(*zip(*by_d))
                row = table_numbers(md, "| sweep: scheme | slope vs L", scheme)
                check(row is not None and close(row[1], s_l, 5e-3) and close(row[3], s_d, 5e-3),
                      f"sweep table {scheme}: {row} vs Python slopes {s_l:.4f} {s_d:.4f}")
                dat = dat_blocks(os.path.join(out, "report", "figures", "sweep-layers-sweep.dat"))
                means = {}
                for l, g in by_l:
                    means.setdefault(l, []).append(g)
                want = [(l, sum(v) / len(v)) for l, v in sorted(means.items())]
                got = next((v for k, v in dat.items() if k.startswith(scheme + " (fitted slope ")), [])
                check(len(got) == len(want) and all(a == b and close(x, y, 1e-6) for (a, x), (b, y) in zip(got, want)),
                      f"sweep-layers figure {scheme}: {got} vs {want}")
            # Fig. 3's first claim, from grad_norms.csv.
            g = {(x["scheme"], x["param"]): float(x["expected_grad_norm_mean"])
                 for x in rows(os.path.join(cell("fig3"), "grad_norms.csv"))}
            a, b = g[("post-ln", "decoder.layers.5.fc2.weight")], g[("post-ln", "decoder.layers.0.fc2.weight")]
            if abs(a - b) > 0.005:
                check(verdicts[claims[0]["text"]] == verdict(a > b), f"fig3 claim: {a} vs {b}")

        if name == "hessian_report":
            for c in cells:
                h = json.load(open(os.path.join(cell(c), "hessian.json")))
                row = table_numbers(md, "| cell | lambda_max |", c)
                check(row is not None and close(row[1], h["lambda_max"], 1e-3), f"hessian table {c}: {row}")
                if not os.path.exists(os.path.join(cell(c), "per_block.csv")):
                    check(not c.startswith("L6+6"), f"{c}: per_block.csv (--per-block at smoke)")
                    continue
                blocks = rows(os.path.join(cell(c), "per_block.csv"))
                layers = [b for b in blocks if ".layers." in b["block"]]
                check(len(layers) == sum(map(int, re.findall(r"L(\d+)\+(\d+)", c)[0])), f"{c}: a block per layer")
                for b in blocks:
                    check(f"| {b['block']} |" in md, f"{c}: per-block table row {b['block']}")
                dat = dat_blocks(os.path.join(out, "report", "figures", "hessian-blocks.dat"))
                for stack in ("encoder", "decoder"):
                    want = sorted((float(b["block"].split(".")[-1]), float(b["lambda_max"])) for b in layers
                                  if b["block"].startswith(stack))
                    got = dat.get(f"{c} {stack}", [])
                    check(len(got) == len(want) and all(close(x, y, 1e-6) for (_, x), (_, y) in zip(got, want)),
                          f"hessian-blocks figure {c} {stack}")
            lm = {c: json.load(open(os.path.join(cell(c), "hessian.json")))["lambda_max"] for c in cells}
            check(verdicts[claims[0]["text"]] == verdict(lm["L6+6_scheme=post-ln"] > lm["L6+6_scheme=pre-ln"]),
                  "hessian claim 1")

        if name in ("huang_table1", "schemes_2025"):
            for c in [c for c in cells if c.startswith("test-")]:
                e = json.load(open(os.path.join(cell(c), "evaluate.json")))
                row = table_numbers(md, "| cell | sentences | BLEU |", c)
                check(row is not None and close(row[2], e["bleu"], 1e-3) and row[1] == e["sentences"],
                      f"test BLEU table {c}: {row} vs {e['bleu']}")

        if name == "schemes":
            p = rows(os.path.join(cell("perturb_delta=sign"), "perturb.csv"))
            mean = lambda s, d: sum(float(x["decoder_change"]) for x in p if x["scheme"] == s and x["depth"] == str(d)) \
                / sum(1 for x in p if x["scheme"] == s and x["depth"] == str(d))
            post, admin = mean("post-ln", 12) / mean("post-ln", 2), mean("admin", 12) / mean("admin", 2)
            text = next(c["text"] for c in claims if "more than Admin" in c["text"])
            if abs(post - admin) > 0.1:
                check(verdicts[text] == verdict(post > admin), f"perturb claim: {post} vs {admin}")
        if name == "advise_grid":
            # scripts/advise_confusion.py: one row per advise cell, its prediction the cell's, its
            # truth from the training cells' own metrics.jsonl (last validation record).
            script = os.path.join(os.path.dirname(args.recipes), "scripts", "advise_confusion.py")
            r = subprocess.run([sys.executable, script, out], capture_output=True, text=True, timeout=60)
            check(r.returncode == 0, f"advise_confusion.py: {r.stderr[-400:]}")
            table = rows(os.path.join(out, "advise_grid.csv")) if r.returncode == 0 else []
            advise_cells = [c for c in cells if c.startswith("advise_")]
            check(len(table) == len(advise_cells), f"advise_grid.csv rows {len(table)} for {len(advise_cells)} cells")

            def valid(c):
                recs = [json.loads(l) for l in open(os.path.join(cell(c), "metrics.jsonl"))]
                v = [x["valid_loss"] for x in recs if "valid_loss" in x]
                return v[-1] if v and v[-1] is not None else math.inf
            for t in table:
                a = json.load(open(os.path.join(cell(f"advise_lr={t['lr']}_scheme={t['scheme']}"), "advise.json")))
                seeds = sorted({c.rsplit("seed=", 1)[1] for c in cells
                                if c.startswith(f"nowarm_lr={t['lr']}_scheme={t['scheme']}_seed=")})
                worse = sum(valid(f"nowarm_lr={t['lr']}_scheme={t['scheme']}_seed={s}") >
                            valid(f"warm_lr={t['lr']}_scheme={t['scheme']}_seed={s}") + 0.1 for s in seeds)
                check(int(t["predicted"]) == int(a["needs_warmup"]) and int(t["truth"]) == int(2 * worse >= len(seeds))
                      and int(t["seeds_worse_without"]) == worse, f"advise_grid row {t}")

        if name == "sharpness":
            # The claims on curvature.jsonl, read here as JSON lines (the report reads them as a table).
            def max_ratio(c):
                r = [json.loads(l).get("ratio") for l in open(os.path.join(cell(c), "curvature.jsonl"))]
                return max(x for x in r if x is not None)
            a = max_ratio("post-ln-nowarm")
            if abs(a - 1) > 0.05:
                check(verdicts[claims[0]["text"]] == verdict(a > 1), f"sharpness claim 1: max ratio {a}")
            b = max_ratio("post-ln-warm")
            if abs(b - 1) > 0.1:
                check(verdicts[claims[1]["text"]] == verdict(b <= 1), f"sharpness claim 2: max ratio {b}")

        if name == "schemes_2025":
            # Mix-LN's last/first-layer gradient ratio between Post-LN's and Pre-LN's, from grad_norms.csv.
            g = {(x["scheme"], x["param"]): float(x["expected_grad_norm_mean"])
                 for x in rows(os.path.join(cell("probe"), "grad_norms.csv"))}
            ratio = {sch: g[(sch, "encoder.layers.7.fc2.weight")] / g[(sch, "encoder.layers.0.fc2.weight")]
                     for sch in ("post-ln", "pre-ln", "mix-ln")}
            for text, holds, other in ((claims[0]["text"], ratio["mix-ln"] < ratio["post-ln"], ratio["post-ln"]),
                                       (claims[1]["text"], ratio["mix-ln"] > ratio["pre-ln"], ratio["pre-ln"])):
                if abs(ratio["mix-ln"] - other) > 0.02:
                    check(verdicts[text] == verdict(holds), f"mix-ln claim: {ratio}")
            # lambda_1 at initialisation: the critical-lr cell's SGD rows, mean over seeds.
            crit = rows(os.path.join(cell("critical"), "critical_lr.csv"))
            lam = {sch: [float(x["curvature"]) for x in crit if x["scheme"] == sch and x["optimizer"] == "sgd"]
                   for sch in ("post-ln", "pre-ln")}
            text = next(c["text"] for c in claims if "lambda_1(H)" in c["text"])
            check(verdicts[text] == verdict(sum(lam["post-ln"]) / len(lam["post-ln"]) >
                                            sum(lam["pre-ln"]) / len(lam["pre-ln"])), f"lambda claim: {lam}")
        if name in ("lr_sensitivity", "lm_lr_sensitivity"):
            # scripts/lr_sensitivity.py's numbers against summary.csv and each cell's own records.
            script = os.path.join(os.path.dirname(args.recipes), "scripts", "lr_sensitivity.py")
            r = subprocess.run([sys.executable, script, out], capture_output=True, text=True, timeout=60)
            check(r.returncode == 0, f"lr_sensitivity.py: {r.stderr[-400:]}")
            table = rows(os.path.join(out, "lr_sensitivity.csv")) if r.returncode == 0 else []
            train_cells = [x for x in rows(os.path.join(out, "summary.csv")) if x["command"] == "train"]
            check(len(table) == len(train_cells), f"lr_sensitivity.csv rows {len(table)} for {len(train_cells)} cells")
            final = {x["cell"]: float(x["final_valid_loss"]) for x in train_cells}
            init = {}
            for c in final:
                for line in open(os.path.join(cell(c), "metrics.jsonl")):
                    init.update({c: json.loads(line)["init_valid_loss"]} if "init_valid_loss" in line else {})
            group = [c for c in final if c.startswith("nowarm_") and c.endswith("scheme=post-ln")]
            best = min(final[c] for c in group)
            expected = sum(min(final[c], init[c]) - best for c in group) / len(group)
            got = [float(t["lr_sensitivity"]) for t in table if t["config"] == "nowarm" and t["scheme"] == "post-ln"]
            # summary.csv rounds each loss to 6 significant digits (~5e-6 here): the mean of differences
            # of two rounded values is exact to 1e-5.
            check(len(group) > 1 and got and all(abs(g - expected) <= 2e-5 for g in got),
                  f"lr_sensitivity nowarm post-ln: {got} vs {expected}")

        if name == "optimizer_warmup":
            # The wsd cell's logged rates against Hägele et al.'s schedule (arXiv 2405.18392, the
            # warm-up-stable-decay with a 1-sqrt cool-down), written here from the paper: update
            # n (a record at step s logs n = s - 1) ramps from I over W updates, holds lr, and from
            # M - D falls as lr (1 - sqrt((n - (M - D)) / D)) towards min_lr 0.
            sched = json.load(open(os.path.join(cell("wsd"), "config.json")))["schedule"]
            lr, W, M, D, I = (sched[k] for k in ("lr", "warmup_steps", "max_steps", "wsd_decay_steps", "warmup_init_lr"))

            def wsd(n):
                if n < W:
                    return I + n * (lr - I) / W
                return lr if n < M - D else lr * (1 - math.sqrt((n - (M - D)) / D))
            logged = [json.loads(l) for l in open(os.path.join(cell("wsd"), "metrics.jsonl")) if '"lr"' in l]
            check(sched["lr_schedule"] == "wsd" and sched["wsd_decay"] == "1-sqrt" and len(logged) >= 3
                  and all(close(x["lr"], wsd(x["step"] - 1), 1e-12) for x in logged),
                  f"optimizer_warmup: wsd rates {[(x['step'], x['lr'], wsd(x['step'] - 1)) for x in logged]}")
            final = {x["cell"]: float(x["final_valid_loss"]) for x in rows(os.path.join(out, "summary.csv"))}
            want = "reproduced" if final["wsd"] - final["cosine"] < 0.02 else "not reproduced"
            text = next(c["text"] for c in claims if c["rule"].startswith("final_valid_loss(wsd)"))
            check(verdicts[text] == want, f"optimizer_warmup: WSD claim {verdicts[text]}, Python says {want}")

        if name == "xiong_fig5":
            # scripts/xiong_fig5.py's mean best dev accuracy per task and scheme against the report's
            # claims (C++), and its validation records against the pre-training cells' summary rows.
            scripts = os.path.join(os.path.dirname(args.recipes), "scripts")
            r = subprocess.run([sys.executable, os.path.join(scripts, "xiong_fig5.py"), out], capture_output=True,
                               text=True, timeout=60)
            check(r.returncode == 0, f"xiong_fig5.py: {r.stderr[-400:]}")
            for task in ("next-line", "word-order"):
                for scheme in ("post-ln", "pre-ln"):
                    got = table_numbers(r.stdout, "| task | scheme |", f"{task} | {scheme} | best")
                    said = re.search(re.escape(f"mean(max(best_valid_accuracy(ft-{task}-{scheme}_*) over lr)) = ")
                                     + r"([0-9.e-]+)", md)
                    check(got is not None and said is not None and close(got[-1], float(said[1]), 1e-3),
                          f"xiong_fig5.py {task} {scheme}: {got} vs the report's {said and said[1]}")
            final = {x["cell"]: x["final_valid_loss"] for x in rows(os.path.join(out, "summary.csv"))}  # 6 digits
            last = {}
            for x in rows(os.path.join(out, "pretraining.csv")):
                last[x["cell"]] = x["valid_loss"]  # in step order
            check(last and all(close(float(v), float(final[c]), 1e-5) for c, v in last.items()),
                  f"xiong_fig5.py pre-training: {last} vs {final}")
            poolings = {c: json.load(open(os.path.join(out, "cells", c, "config.json")))["model"].get("classifier_pooling")
                        for c in os.listdir(os.path.join(out, "cells")) if c.startswith("ft-")}
            check(poolings and set(poolings.values()) == {"mean"}, f"xiong_fig5 fine-tuning poolings: {poolings}")

        if name in ("warmup_auto", "warmup_auto_lm"):
            # scripts/warmup_auto.py: a row per training cell, its loss the cell's last validation
            # loss; each auto cell's ramp starts at min(1, 38 / (lambda_0 lr)) (Adam at beta1 0.9);
            # scripts/warmup_predictor.py: a row per probe cell.
            scripts = os.path.join(os.path.dirname(args.recipes), "scripts")
            gate_cells = [c for c in tomllib.load(open(path, "rb"))["cells"] if c["name"] == "gate"]
            threshold = gate_cells[0]["scale"]["smoke"]["warmup-gate"]  # the recipe's G at the smoke scale
            r = subprocess.run([sys.executable, os.path.join(scripts, "warmup_auto.py"), out], capture_output=True,
                               text=True, timeout=60)
            check(r.returncode == 0, f"warmup_auto.py: {r.stderr[-400:]}")
            table = rows(os.path.join(out, "warmup_auto.csv")) if r.returncode == 0 else []
            trained = [c for c in cells if not c.startswith("probe_") and c != "text"]  # text: lm-data's cell
            check(len(table) == len(trained), f"warmup_auto.csv rows {len(table)} for {len(trained)} cells")
            decisions = set()
            for t in table:
                c = f"{t['arm']}_lr={t['lr']}_scheme={t['scheme']}_seed={t['seed']}"
                recs = [json.loads(l) for l in open(os.path.join(cell(c), "metrics.jsonl"))]
                v = [x["valid_loss"] for x in recs if x.get("valid_loss") is not None]
                check(v and close(float(t["valid_loss"]), v[-1], 1e-12), f"warmup_auto.csv {c}: {t['valid_loss']} vs {v}")
                if t["arm"] == "auto":
                    first = json.loads(open(os.path.join(cell(c), "warmup.jsonl")).readline())
                    want = min(1.0, 38 / (first["preconditioned_lambda_max"] * float(t["lr"])))
                    check(close(first["factor"], want, 1e-12), f"{c}: start factor {first['factor']} vs {want}")
                if t["arm"] in ("gate", "gatew25"):
                    # The decision from the probe's own records (ramp iff the drop exceeds G), and the
                    # run as decided: auto's ramp (a warmup.jsonl) or w25's 50 updates, or none.
                    g = json.load(open(os.path.join(cell(c), "gate.json")))
                    decisions.add(g["decision"])
                    ups = [json.loads(l) for l in open(os.path.join(cell(c), "probe", "metrics.jsonl"))]
                    ups = [x for x in ups if "grad_norm" in x]
                    drop = ups[0]["loss"] - ups[-1]["loss"]
                    sched = json.load(open(os.path.join(cell(c), "config.json")))["schedule"]
                    ramp = drop > threshold
                    ran = (os.path.exists(os.path.join(cell(c), "warmup.jsonl")) if t["arm"] == "gate"
                           else sched["warmup_steps"] == 50)
                    check(len(ups) == 2 and g["loss_drop"] == drop and g["threshold"] == threshold and
                          g["decision"] == ("ramp" if ramp else "none")
                          and ran == ramp, f"{c}: gate {g} vs the probe's drop {drop}, schedule {sched}")
            check(decisions == {"ramp", "none"}, f"{name}: the gate's decisions at the smoke scale {decisions}")
            # --with: the kept csv alone gives the same tables as the cells it was written from.
            kept = os.path.join(out, "kept")
            os.makedirs(kept, exist_ok=True)
            r = subprocess.run([sys.executable, os.path.join(scripts, "warmup_auto.py"), kept, "--with",
                                os.path.join(out, "warmup_auto.csv")], capture_output=True, text=True, timeout=60)
            check(r.returncode == 0 and open(os.path.join(kept, "warmup_auto.md")).read()
                  == open(os.path.join(out, "warmup_auto.md")).read(), f"warmup_auto.py --with: {r.stderr[-400:]}")
            r = subprocess.run([sys.executable, os.path.join(scripts, "warmup_predictor.py"), out, "--fit-schemes",
                                "post-ln"], capture_output=True, text=True, timeout=60)
            check(r.returncode == 0, f"warmup_predictor.py: {r.stderr[-400:]}")
            probes = rows(os.path.join(out, "warmup_predictor.csv")) if r.returncode == 0 else []
            check(len(probes) == len([c for c in cells if c.startswith("probe_")]), f"warmup_predictor.csv rows")
            # --with: the probe cells alone take the fixed arms' losses from a kept csv. In it, every
            # w0 loss raised by 10 nats: each configuration then has both of its 2 seeds worse
            # without warm-up (needs warm-up: two thirds of the seeds); the probes' quantities unchanged.
            only = os.path.join(out, "probes-only")
            os.makedirs(os.path.join(only, "cells"), exist_ok=True)
            for c in cells:
                if c.startswith("probe_") and not os.path.exists(os.path.join(only, "cells", c)):
                    os.symlink(cell(c), os.path.join(only, "cells", c))
            kept_rows = rows(os.path.join(out, "warmup_auto.csv"))
            for x in kept_rows:
                if x["arm"] == "w0":
                    x["valid_loss"] = repr(float(x["valid_loss"]) + 10)
            with open(os.path.join(only, "kept.csv"), "w", newline="") as f:
                wr = csv.DictWriter(f, fieldnames=list(kept_rows[0]))
                wr.writeheader()
                wr.writerows(kept_rows)
            r = subprocess.run([sys.executable, os.path.join(scripts, "warmup_predictor.py"), only, "--fit-schemes",
                                "post-ln", "--with", os.path.join(only, "kept.csv")], capture_output=True,
                               text=True, timeout=60)
            got = rows(os.path.join(only, "warmup_predictor.csv")) if r.returncode == 0 else []
            want = [dict(x, needs_warmup="1", seeds_worse_without="2") for x in probes]
            check(got == want and len(got) > 0, f"warmup_predictor.py --with: {r.stderr[-400:]} {got[:2]}")

        if name in ("lr_transfer_width", "lm_lr_transfer"):
            by = check_lr_transfer(os.path.dirname(args.recipes), out, cells, cell, check)
            widths = {k[3] for k in by}
            # mup is sp bit for bit at its base width (w2 at lr_transfer_width's smoke scale, w1 at
            # lm_lr_transfer's).
            base = [c for c in cells if c.startswith("w2_" if name == "lr_transfer_width" else "w1_")
                    and "parametrisation=mup" in c]
            check(base and all(by_cell(by, c) == by_cell(by, c.replace("parametrisation=mup", "parametrisation=sp"))
                               for c in base), f"{name}: mup != sp at the base width: {base}")
        if name == "lr_transfer_width":
            # The first two claims (Pre-LN with warm-up, narrowest against widest width) from the
            # cells' own records: mup's at each lr of this grid (the recipe's two largest), sp's at the top.
            narrow, wide = min(widths), max(widths)
            pre = lambda p, w: by[(p, "pre-ln", True, w)]
            for claim, pairs, holds in (
                    (claims[0], [(pre("mup", wide)[lr], pre("mup", narrow)[lr]) for lr in pre("mup", wide)],
                     lambda a, b: a < b),
                    (claims[1], [(pre("sp", wide)[max(pre("sp", wide))], pre("sp", narrow)[max(pre("sp", wide))])],
                     lambda a, b: a > b)):
                if all(abs(a - b) > claim.get("margin", 0) for a, b in pairs):
                    want = verdict(all(holds(a, b) for a, b in pairs))
                    check(verdicts[claim["text"]] == want, f"lr_transfer_width: claim {verdicts[claim['text']]}, "
                          f"Python says {want}: {pairs}")

        if name == "umup_alphas":
            check_umup_alphas(os.path.dirname(args.recipes), out, cells, cell, check, claims, verdicts)

        if name == "dt_fixup":
            # deep-frozen: the trained part bit-identical to pretrain's best checkpoint (torch.load);
            # every deep cell: the encoder grown by the added layers, its init_from event's init.
            import torch
            base = torch.load(os.path.join(cell("pretrain"), "checkpoints", "checkpoint_best.pt"))
            frozen = torch.load(os.path.join(cell("deep-frozen"), "checkpoints", "checkpoint_last.pt"))
            trained = [k for k, v in base.items() if isinstance(v, torch.Tensor) and k.startswith(("encoder.", "decoder."))]
            check(trained and all(torch.equal(base[k], frozen[k]) for k in trained), "dt_fixup: deep-frozen moved")
            for c in [c for c in cells if c.startswith("deep_init=")]:
                e = [json.loads(l) for l in open(os.path.join(cell(c), "metrics.jsonl")) if '"init_from"' in l]
                check(len(e) == 1 and e[0]["init"] == c.split("=")[1] and e[0]["add_encoder_layers"] > 0,
                      f"dt_fixup: {c}'s init_from event {e}")
            # The authors' form has no norms in the top (added) layer and config.json says so;
            # dt-fixup-postln keeps them.
            for c, norm_free in (("deep_init=dt-fixup", True), ("deep_init=dt-fixup-postln", False)):
                model = json.load(open(os.path.join(cell(c), "config.json")))["model"]
                last = torch.load(os.path.join(cell(c), "checkpoints", "checkpoint_last.pt"))
                top = f"encoder.layers.{model['encoder_layers'] - 1}.final_layer_norm.weight"
                check((model.get("norm_free_encoder_layers", 0) > 0) == norm_free and (top in last) != norm_free,
                      f"dt_fixup: {c}'s added layers (norm-free {norm_free}): {model}")
        print(f"{name}: {len(cells)} cells, run {wall:.1f} s, {len(figs)} figures, "
              f"{len(claims)} claims: {sorted(verdicts.values())}")

    return check.finish()


if __name__ == "__main__":
    sys.exit(main())
