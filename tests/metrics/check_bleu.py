#!/usr/bin/env python3
"""`normlab bleu --json` against sacreBLEU's Python API (the independent reference).

Cases: REFERENCE.md §3's known values; all WMT17 en-de systems with BLEU (13a / none, every
smoothing, lowercase) and chrF / chrF++; edge cases (empty lines, byte-order mark, Unicode,
two references). Each score must agree to |diff| < 0.01; the worst difference is printed.
Skips (exit 0, with a message) when the WMT17 folder is absent.
"""
import argparse
import glob
import gzip
import json
import os
import subprocess
import sys

import sacrebleu
from sacrebleu.metrics import BLEU, CHRF

TOL = 0.01


def read_lines(path):
    # As sacreBLEU reads a file: UTF-8 (a byte-order mark stays a character), split on "\n" only.
    with open(path, encoding="utf-8", newline="\n") as f:
        return [line.rstrip("\n") for line in f]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--normlab", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--systems", type=int, default=0, help="0: all")
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    w = lambda name: os.path.join(args.workdir, name)
    worst = {"bleu": (0.0, "all exact"), "chrf": (0.0, "all exact")}
    failures = []

    def normlab(hyp, refs, *opts):
        argv = [args.normlab, "bleu", "--json", "--hyp", hyp, *sum((["--ref", r] for r in refs), []), *opts]
        r = subprocess.run(argv, capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            raise SystemExit(f"FAIL {' '.join(argv)}: {r.stderr}")
        return json.loads(r.stdout)

    def compare(kind, label, ours, theirs):
        d = abs(ours - theirs)
        if d > worst[kind][0]:
            worst[kind] = (d, label)
        if not d < TOL:
            failures.append(f"{label}: normlab {ours} sacrebleu {theirs}")

    def check(label, hyp, refs, opts, bleu_kw, chrf_word_order=None):
        hyps = read_lines(hyp)
        ref_lines = [read_lines(r) for r in refs]
        extra = [] if chrf_word_order is None else ["--chrf", "--chrf-word-order", str(chrf_word_order)]
        got = normlab(hyp, refs, *opts, *extra)
        ref = BLEU(**bleu_kw).corpus_score(hyps, ref_lines)
        compare("bleu", label, got["bleu"], ref.score)
        if got["sys_len"] != ref.sys_len or got["ref_len"] != ref.ref_len:
            failures.append(f"{label}: lengths {got['sys_len']}/{got['ref_len']} vs {ref.sys_len}/{ref.ref_len}")
        for a, b in zip(got["precisions"], ref.precisions):
            if not abs(a - b) < TOL:
                failures.append(f"{label}: precisions {got['precisions']} vs {ref.precisions}")
                break
        if chrf_word_order is not None:
            c = CHRF(word_order=chrf_word_order, lowercase=bleu_kw.get("lowercase", False))
            compare("chrf", label + f" chrf nw={chrf_word_order}", got["chrf"], c.corpus_score(hyps, ref_lines).score)
        return got

    # REFERENCE.md §3: sacreBLEU's own test values.
    hyps = ["The dog bit the man.", "It wasn't surprising.", "The man had just bitten him."]
    refs = [["The dog bit the man.", "It was not unexpected.", "The man bit him first."],
            ["The dog had bit the man.", "No one was surprised.", "The man had bitten the dog."]]
    for name, lines in [("known.hyp", hyps), ("known.ref1", refs[0]), ("known.ref2", refs[1])]:
        with open(w(name), "w", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
    known = [w("known.ref1"), w("known.ref2")]
    for opts, expected in [([], 48.530827), (["--tokenize", "none"], 49.1919566)]:
        got = normlab(w("known.hyp"), known, *opts)
        if not abs(got["bleu"] - expected) < 1e-6:
            failures.append(f"known value {opts}: {got['bleu']} != {expected}")
    got = normlab(w("known.hyp"), known)
    if got["signature"] != "nrefs:2|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0":
        failures.append(f"signature {got['signature']}")
    check("known 2 refs", w("known.hyp"), known, [], {}, 2)

    # Edge cases: empty lines, a byte-order mark (kept, as Python's utf-8 codec keeps it),
    # Unicode white space and letters, HTML entities, CRLF endings.
    edge_hyp = "\ufeffDer Hund biß den Mann.\n\nÄrger  über\u00a0Öl, 3-4 Tage &amp; 1.000,5 €.\r\nΚαλημέρα κόσμε İstanbul\n(hi) \"quoted\" <skipped> x\n"
    edge_ref = "Der Hund biss den Mann.\nleer\nÄrger über Öl, 3-4 Tage & 1.000,5 €.\r\nκαλημέρα Κόσμε! i̇stanbul\n(hi) \"quoted\" x\n"
    with open(w("edge.hyp"), "w", encoding="utf-8", newline="") as f:
        f.write(edge_hyp)
    with open(w("edge.ref"), "w", encoding="utf-8", newline="") as f:
        f.write(edge_ref)
    for tok in ["13a", "none"]:
        for lc in [False, True]:
            opts = ["--tokenize", tok] + (["--lowercase"] if lc else [])
            check(f"edge tok={tok} lc={lc}", w("edge.hyp"), [w("edge.ref")], opts,
                  {"tokenize": tok, "lowercase": lc}, 2)
            check(f"edge chrF tok={tok} lc={lc}", w("edge.hyp"), [w("edge.ref")], opts,
                  {"tokenize": tok, "lowercase": lc}, 0)

    # --sentence: one BLEU per line, as sacrebleu.sentence_bleu (effective order).
    for hyp, refs_ in [(w("known.hyp"), known), (w("edge.hyp"), [w("edge.ref")])]:
        argv = [args.normlab, "bleu", "--sentence", "--json", "--hyp", hyp, *sum((["--ref", r] for r in refs_), [])]
        out = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        ours = [json.loads(line)["bleu"] for line in out.stdout.splitlines()]
        ref_lines = [read_lines(r) for r in refs_]
        theirs = [sacrebleu.sentence_bleu(h, list(rs)).score for h, rs in zip(read_lines(hyp), zip(*ref_lines))]
        if out.returncode != 0 or len(ours) != len(theirs):
            failures.append(f"--sentence {hyp}: {out.stderr}")
        for i, (a, b) in enumerate(zip(ours, theirs)):
            compare("bleu", f"--sentence {os.path.basename(hyp)}:{i + 1}", a, b)

    wmt = os.path.join(args.data, "wmt17-en-de")
    systems = sorted(glob.glob(os.path.join(wmt, "newstest2017.*.en-de.gz")))
    if not systems:
        print(f"SKIP WMT17 part: no systems under {wmt}")
    else:
        def gunzip(src):
            dst = w(os.path.basename(src)[:-3])
            with gzip.open(src, "rb") as fi, open(dst, "wb") as fo:
                fo.write(fi.read())
            return dst
        ref = gunzip(os.path.join(wmt, "newstest2017-ende-ref.de.gz"))
        if args.systems:
            systems = systems[: args.systems]
        for k, gz in enumerate(systems):
            hyp = gunzip(gz)
            name = os.path.basename(hyp)
            check(f"{name} 13a exp chrF++", hyp, [ref], [], {}, 2)
            check(f"{name} none chrF", hyp, [ref], ["--tokenize", "none"], {"tokenize": "none"}, 0)
            check(f"{name} lowercase", hyp, [ref], ["--lowercase"], {"lowercase": True})
            for smooth in ["floor", "add-k", "none"]:
                check(f"{name} smooth {smooth}", hyp, [ref], ["--smooth", smooth], {"smooth_method": smooth})
            # Two references (the second another system), as a multi-reference corpus.
            if k == 0:
                other = gunzip(systems[-1])
                check(f"{name} 2 refs", hyp, [ref, other], [], {}, 2)
        print(f"{len(systems)} WMT17 systems compared")

    print(f"worst |diff| BLEU {worst['bleu'][0]:.3g} ({worst['bleu'][1]}), "
          f"chrF {worst['chrf'][0]:.3g} ({worst['chrf'][1]})")
    for f in failures:
        print("FAIL", f)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
