#!/usr/bin/env python3
"""`normlab report` on a run folder written here by hand in the result-file formats of the
brief (metrics.jsonl, grad_norms.csv, hidden_norms.csv, trace/*.csv, perturb.csv,
density.csv + hessian.json): every figure kind is drawn (valid PNG, SVG that parses as XML),
the tables hold the numbers Python computes from the same data, and every claim rule gets the
verdict Python's own evaluation gives (reproduced / not reproduced / inconclusive)."""
import json
import math
import os
import random
import subprocess
import sys
import xml.etree.ElementTree as ET

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import cli_setup  # noqa: E402


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def csv(path, header, rows):
    write(path, header + "\n" + "".join(",".join(str(x) for x in r) + "\n" for r in rows))


def g4(x):  # the report's number format (C's %.4g)
    return "%.4g" % x


def main():
    args, w = cli_setup.start()
    d = w("run")
    cells = os.path.join(d, "cells")
    rnd = random.Random(5)
    check = cli_setup.Checks()

    # Train cells: a and b train, c diverged at epoch 3, f failed, n never ran.
    valid = {"a": [4.0, 3.1, 2.5], "b": [4.2, 3.6, 3.3], "c": [4.5, 6.0]}
    for name, losses in valid.items():
        recs = []
        for e, v in enumerate(losses, 1):
            recs.append({"step": 10 * e - 5, "epoch": e, "lr": 1e-3, "loss": v + 0.3, "nll": v, "grad_norm": 1.0})
            recs.append({"step": 10 * e, "epoch": e, "valid_loss": v, "valid_nll": v - 0.2, "valid_ppl": 1,
                         "valid_bleu": 10 * (5 - v)})
        if name == "c":
            recs.append({"event": "diverged", "step": 25, "epoch": 3, "loss": None})
        write(f"{cells}/{name}/metrics.jsonl", "".join(json.dumps(r) + "\n" for r in recs))
    status = {"a": ("ok", 0), "b": ("ok", 0), "c": ("diverged", 0), "f": ("failed", 2), "p": ("ok", 0),
              "t": ("ok", 0), "q": ("ok", 0), "h1": ("ok", 0), "h2": ("ok", 0)}
    for name, (st, code) in status.items():
        argv = ["train", "--precision", "bf16"] if name == "b" else ["train"]
        write(f"{cells}/{name}/cell.json", json.dumps({"name": name, "command": "train", "argv": argv, "grid": {},
                                                       "exit_code": code, "status": st, "wall_s": 1.5}))
    # A grid of cells (checkpoint u x lr), each with one validation loss, for AGG(AGG(... over KEY)).
    gridded = {(u, lr): rnd.uniform(2, 4) for u in (250, 500, 1000) for lr in ("1e-4", "3e-4")}
    for (u, lr), v in gridded.items():
        name = f"g_init-from-update={u}_lr={lr}"
        write(f"{cells}/{name}/metrics.jsonl", json.dumps({"step": 10, "epoch": 1, "valid_loss": v}) + "\n")
        write(f"{cells}/{name}/cell.json", json.dumps({
            "name": name, "command": "train", "argv": ["train"], "grid": {"init-from-update": str(u), "lr": lr},
            "exit_code": 0, "status": "ok", "wall_s": 1.0}))
    best_per_u = [min(gridded[(u, lr)] for lr in ("1e-4", "3e-4")) for u in (250, 500, 1000)]
    worst_u_per_lr = [max(gridded[(u, lr)] for u in (250, 500, 1000)) for lr in ("1e-4", "3e-4")]
    mean_best = sum(best_per_u) / 3

    # probe: grad_norms.csv and hidden_norms.csv
    grad_rows, fc2 = [], {}
    for scheme in ("post-ln", "pre-ln"):
        for stack in ("encoder", "decoder"):
            for layer in range(3):
                for param in ("self_attn.k_proj.weight", "fc2.weight"):
                    g = rnd.uniform(0.1, 2.0)
                    if param == "fc2.weight":
                        fc2[(scheme, stack, layer)] = g
                    grad_rows.append([scheme, stack, layer, f"{stack}.layers.{layer}.{param}", g, 0.1, g * 1.1, 0.1])
        grad_rows.append([scheme, "embedding", -1, "embed_tokens.weight", 0.5, 0.0, 0.5, 0.0])
    csv(f"{cells}/p/grad_norms.csv", "scheme,stack,layer,param,expected_grad_norm_mean,expected_grad_norm_std,"
        "mean_grad_norm_mean,mean_grad_norm_std", grad_rows)
    hidden = [["post-ln", "encoder", l, "x_post_ln", 22.6 + rnd.random(), 0.1, 22.6, 20.0, 25.0] for l in range(3)]
    hidden += [["pre-ln", "encoder", l, "x_pre_ln", 10 * (l + 1) + rnd.random(), 0.1, 10 * (l + 1), "", ""]
               for l in range(3)]
    csv(f"{cells}/p/hidden_norms.csv", "scheme,stack,layer,quantity,value_mean,value_std,lemma_value,lemma_lower,"
        "lemma_upper", hidden)

    # trace: histograms (with the zero bin) and LayerNorm inputs
    hist = []
    for step in range(1, 6):
        for kind in ("grad", "update"):
            for param in ("a.weight", "b.weight"):
                hist.append([step, param, kind, "-inf", "-inf", 3])
                for b in range(-8, 0):
                    hist.append([step, param, kind, b, b + 1, rnd.randint(0, 50)])
    csv(f"{cells}/t/trace/histograms.csv", "step,param,kind,bin_lo,bin_hi,count", hist)
    ln = [[s, st, l, n, rnd.uniform(1, 30)] for s in range(1, 6) for st in ("encoder", "decoder") for l in range(2)
          for n in ("self_attn_layer_norm", "final_layer_norm")]
    csv(f"{cells}/t/trace/ln_inputs.csv", "step,stack,layer,ln,mean_input_norm", ln)

    # perturb: two seeds per (scheme, depth)
    pert = [[sc, depth, seed, 0.01, rnd.uniform(0.01, 1) * depth, rnd.uniform(0.01, 1) * depth]
            for sc in ("post-ln", "admin") for depth in (6, 12, 24) for seed in (1, 2)]
    csv(f"{cells}/q/perturb.csv", "scheme,depth,seed,delta,encoder_change,decoder_change", pert)

    # hessian: two cells
    lmax = {"h1": 35.5, "h2": 4.25}
    for name, lm in lmax.items():
        csv(f"{cells}/{name}/density.csv", "lambda,density",
            [[x / 10, math.exp(-((x / 10) ** 2) / 4) + 1e-6] for x in range(-50, int(lm * 10) + 1, 5)] +
            [[lm + 1, 5e-324], [lm + 2, 0.0]])  # underflow and zero, as far tails of a real density hold
        write(f"{cells}/{name}/hessian.json", json.dumps({"lambda_max": lm, "lambda_min": -1.5, "trace": 12.0,
                                                          "trace_stderr": 0.5, "sentences": 64}))

    # Claims with Python's expected verdicts.
    final = {k: (math.inf if k == "c" else v[-1]) for k, v in valid.items()}
    enc_max = lambda sc: max(r[4] for r in pert if r[0] == sc)
    claims = [
        ("final_valid_loss(a) < final_valid_loss(b)", 0, final["a"] < final["b"]),
        ("final_valid_loss(a) > final_valid_loss(b)", 0, final["a"] > final["b"]),
        ("final_valid_loss(a) < final_valid_loss(b)", 1.0, None),  # |2.5 - 3.3| <= 1: inconclusive
        ("diverged(c)", 0, True),
        ("final_valid_loss(b) < final_valid_loss(c)", 0, True),  # a diverged cell's final loss is inf
        ("final_valid_loss(f) < 1", 0, None),  # failed cell: not measured
        ("diverged(n)", 0, None),  # no such cell
        ("max(best_valid_loss([abc])) < 3.4", 0, max(min(v) for v in valid.values()) < 3.4),
        ("best_valid_bleu(a) > 2 * best_valid_bleu(b) - 3", 0, 10 * (5 - 2.5) > 2 * 10 * (5 - 3.3) - 3),
        ('json(h1, "hessian.json", "lambda_max") > json(h2, "hessian.json", "lambda_max")', 0, True),
        ('csv(q, "perturb.csv", "encoder_change", "max", "scheme=post-ln") > '
         'csv(q, "perturb.csv", "encoder_change", "max", "scheme=admin")', 0, enc_max("post-ln") > enc_max("admin")),
        ("not ok(c) and (diverged(c) or failed(f))", 0, True),
        ("ok(a) or final_valid_loss(f) < 1", 0, True),  # Kleene: true or unknown = true
        ("ok(a) and final_valid_loss(f) < 1", 0, None),  # true and unknown = unknown
        ("final_valid_loss(a*) < 5", 0, True),  # a glob matching one cell needs no aggregate
        ("final_valid_loss(*) < 5", 0, None),  # several cells without min/max/mean: not decided
        # The best lr per checkpoint, then the mean over checkpoints; and the worst checkpoint per lr.
        (f"mean(min(best_valid_loss(g_*) over lr)) < {mean_best + 0.01}", 0, True),
        (f"mean(min(best_valid_loss(g_*) over lr)) > {mean_best + 0.01}", 0, False),
        (f"min(max(best_valid_loss(g_*) over init-from-update)) < {min(worst_u_per_lr) + 0.01}", 0, True),
        (f"min(max(best_valid_loss(g_*) over init-from-update)) > {min(worst_u_per_lr) - 0.01}", 0, True),
        ("mean(min(best_valid_loss(g_*) over seed)) < 9", 0, None),  # no such grid key: not measured
        ("mean(min(best_valid_loss(a) over lr)) < 9", 0, None),  # a cell without a grid
    ]
    toml = 'title = "report test"\n[[cells]]\nname = "x"\ncommand = "train"\n'
    for k, (rule, margin, _) in enumerate(claims):
        toml += f'\n[[claims]]\ntext = "claim {k}"\nrule = {json.dumps(rule)}\nmargin = {margin}\n'
    write(f"{d}/recipe.toml", toml)
    names = ["a", "b", "c", "f", "n", "p", "t", "q", "h1", "h2"] + [f"g_init-from-update={u}_lr={lr}"
                                                                    for (u, lr) in gridded]
    write(f"{d}/run.json", json.dumps({"recipe": "test", "title": "report test", "scale": "smoke",
                                       "cells": [{"name": n, "argv": []} for n in names]}))

    r = subprocess.run([args.normlab, "report", d], capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        print("FAIL: normlab report:", r.stderr)
        return 1
    rep = json.load(open(f"{d}/report/report.json"))["sources"][0]
    want = {True: "reproduced", False: "not reproduced", None: "inconclusive"}
    for k, (rule, margin, truth) in enumerate(claims):
        got = rep["claims"][k]["verdict"]
        check(got == want[truth], f"claim {rule!r} (margin {margin}): {got}, expected {want[truth]}")

    # A side computed from several terms shows its result: here 2 * 10 * (5 - 3.3) - 3 = 31 (> 25).
    arithmetic = rep["claims"][8]["reason"]
    check(arithmetic.endswith("- 3 [= 31] does not hold") and arithmetic.count("[=") == 1,
          f"reason of the arithmetic claim: {arithmetic!r}")

    # The grouped value's reason: the mean of the three per-checkpoint minima, and how many groups.
    grouped = rep["claims"][16]["reason"]
    check(f"mean(min(best_valid_loss(g_*) over lr)) = {g4(mean_best)} [3 groups] <" in grouped,
          f"reason of the grouped claim: {grouped!r}")
    unkeyed = rep["claims"][20]["reason"]
    check("has no grid key seed" in unkeyed, f"reason of the claim over a missing key: {unkeyed!r}")

    figures = {f["name"]: f for f in rep["figures"]}
    expected = ["valid-loss", "valid-bleu", "train-loss", "grad-norms-p", "hidden-norms-p", "histogram-grad-t",
                "histogram-update-t", "ln-inputs-encoder-t", "ln-inputs-decoder-t", "perturb-q", "hessian-density",
                "lr-grid"]  # lr-grid: the g_* cells' final losses against their lr
    check(sorted(figures) == sorted(expected), f"figures {sorted(figures)}")
    for name in expected:
        if name not in figures:
            continue
        png = os.path.join(d, "report", figures[name]["png"])
        svg = os.path.join(d, "report", figures[name]["svg"])
        with open(png, "rb") as f:
            check(f.read(8) == b"\x89PNG\r\n\x1a\n" and os.path.getsize(png) > 2000, f"{name}: PNG")
        try:
            root = ET.parse(svg).getroot()
            check(root.tag.endswith("svg") and len(list(root.iter())) > 20, f"{name}: SVG content")
        except ET.ParseError as e:
            check.failures.append(f"{name}: SVG does not parse: {e}")

    md = open(f"{d}/report/REPORT.md").read()
    for name in expected:
        check(f"](figures/{name}.png)" in md, f"REPORT.md links {name}")
    check("| h1 | 35.5 | -1.5 | 12 | 0.5 | 64 |" in md, "hessian table row")
    for sc in ("post-ln", "admin"):
        for depth in (6, 12, 24):
            rows = [x for x in pert if x[0] == sc and x[1] == depth]
            e = sum(x[4] for x in rows) / 2
            dec = sum(x[5] for x in rows) / 2
            check(f"| {sc} 0.01 | {depth} | {g4(e)} | {g4(dec)} |" in md, f"perturb table {sc} {depth}")
    for sc in ("post-ln", "pre-ln"):
        for st in ("encoder", "decoder"):
            first, last = fc2[(sc, st, 0)], fc2[(sc, st, 2)]
            check(f"| {sc} {st} | 3 | {g4(first)} | {g4(last)} | {g4(last / first)} |" in md, f"grad table {sc} {st}")
    check("| a | train | fp32 | ok | 0 | 1.5 | 2.5 | 2.5 | 25 | 3 |" in md, "cell table row a")
    check("| b | train | bf16 | ok | 0 |" in md, "cell table row b: its --precision")
    check("| c | train | fp32 | diverged | 0 | 1.5 | inf | 4.5 |" in md, "cell table row c")
    check("| n | - | fp32 | not run | - |" in md, "cell table row n")
    # The histogram heat map leaves out the zero bin: 8 finite bins x 5 steps, counts summed over params.
    dat = [l.split() for l in open(f"{d}/report/figures/histogram-grad-t.dat") if l.strip()]
    check(len(dat) == 40, f"heat map cells: {len(dat)}")
    sums = {}
    for row in hist:
        if row[2] == "grad" and row[3] != "-inf":
            key = (row[0], row[3] + 0.5)
            sums[key] = sums.get(key, 0) + row[5]
    for x, y, v in dat:
        s = sums[(int(float(x)), float(y))]
        check((v == "NaN") == (s == 0) and (s == 0 or abs(float(v) - math.log10(s)) < 1e-9), f"heat map {x} {y}")

    return check.finish(f"{len(claims)} claims, {len(expected)} figures checked")


if __name__ == "__main__":
    sys.exit(main())
