#!/usr/bin/env python3
"""Bad input gives exit code 2 and one line on stderr naming the problem, never a crash."""
import argparse
import os
import subprocess
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--normlab", required=True)
    ap.add_argument("--workdir", required=True)
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    w = lambda name: os.path.join(args.workdir, name)

    with open(w("src.txt"), "w") as f:
        f.write("5 6 7\n8 9\n")
    with open(w("tgt.txt"), "w") as f:
        f.write("7 8\n9 10 11\n")
    with open(w("tgt_short.txt"), "w") as f:
        f.write("7 8\n")
    with open(w("tgt_bad.txt"), "w") as f:
        f.write("7 8\n9 x 11\n")
    with open(w("tgt_special.txt"), "w") as f:
        f.write("7 8\n9 2 11\n")
    with open(w("garbage.ckpt"), "wb") as f:
        f.write(os.urandom(200))
    tiny = ["--d-model", "8", "--ffn-dim", "8", "--heads", "2", "--encoder-layers", "1",
            "--decoder-layers", "1", "--vocab-size", "20"]
    ok = subprocess.run([args.normlab, "init", *tiny, "--out", w("good.ckpt")], capture_output=True)
    assert ok.returncode == 0, ok.stderr.decode()
    with open(w("good.ckpt"), "rb") as f:
        data = f.read()
    with open(w("truncated.ckpt"), "wb") as f:
        f.write(data[: len(data) // 2])
    ok = subprocess.run([args.normlab, "export", "--checkpoint", w("good.ckpt"), "--out", w("weights.pt")],
                        capture_output=True)
    assert ok.returncode == 0, ok.stderr.decode()

    score = lambda ckpt, tgt="tgt.txt": ["score", "--checkpoint", w(ckpt), "--src-ids", w("src.txt"),
                                         "--tgt-ids", w(tgt)]
    cases = [
        (["init", "--scheme", "post_ln", *tiny, "--out", w("x")], "unknown scheme 'post_ln'"),
        (["init", "--preset", "huge", *tiny, "--out", w("x")], "unknown preset 'huge'"),
        (["init", "--d-model", "10", "--heads", "3", "--vocab-size", "20", "--out", w("x")],
         "not divisible by --heads 3"),
        (["init", *tiny[:6], "--encoder-layers", "0", "--vocab-size", "20", "--out", w("x")],
         "--encoder-layers must be positive"),
        (["init", "--ffn-dim", "-4", "--d-model", "8", *tiny[4:], "--out", w("x")], "--ffn-dim must be positive"),
        (["init", "--scheme", "pre-ln", "--init", "t-fixup", *tiny, "--out", w("x")], "without LayerNorm"),
        (["init", "--scheme", "rezero", "--norm", "post", *tiny, "--out", w("x")], "needs --norm none"),
        (["init", *tiny, "--dtype", "float16", "--out", w("x")], "--dtype"),
        (["init", *tiny], "--out is required"),
        (score("missing.ckpt"), "missing.ckpt"),
        (score("garbage.ckpt"), "garbage.ckpt: not a readable PyTorch archive"),
        (score("truncated.ckpt"), "truncated.ckpt"),
        (score("weights.pt"), "not a normlab checkpoint"),
        (score("good.ckpt", "tgt_short.txt"), "has 2 lines but"),
        (score("good.ckpt", "tgt_bad.txt"), "tgt_bad.txt:2: expected non-negative integer"),
        (score("good.ckpt", "tgt_special.txt"), "tgt_special.txt:2: id 2 is a special token"),
        (score("good.ckpt") + ["--ls-formula", "fairseq"], "--ls-formula: unknown value"),
        (score("good.ckpt") + ["--device", "tpu"], "--device must be"),
        (["info", "--threads", "-1"], "--threads"),
    ]
    failures = 0
    for argv, expected in cases:
        r = subprocess.run([args.normlab, *argv], capture_output=True, text=True, timeout=60)
        lines = r.stderr.strip().splitlines()
        good = r.returncode == 2 and len(lines) == 1 and expected in lines[0]
        if not good:
            failures += 1
            print(f"FAIL {' '.join(argv)}\n  rc={r.returncode} stderr={r.stderr!r}\n  expected: {expected!r}")
    print(f"{len(cases) - failures} passed, {failures} failed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
