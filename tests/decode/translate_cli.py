#!/usr/bin/env python3
"""translate / evaluate / train --eval-bleu end to end on real data (Multi30k val, a tiny
model trained for two epochs):

- train --eval-bleu --best-metric bleu: every validation record has valid_bleu in [0, 100],
  and checkpoint_best.pt is the epoch checkpoint with the highest valid_bleu (byte-identical);
- translate with the checkpoint's own vocabulary: one output line per input line, an empty
  input line gives an empty output line in place, and the text equals evaluate's --hyp-out;
- evaluate --json: BLEU and chrF equal sacreBLEU's Python API on the same hypotheses and
  references (to 1e-9), and the loss equals `normlab score` on the same pairs as ids.
"""
import gzip
import json
import os
import subprocess
import sys
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import cli_setup  # noqa: E402

LINES = 60  # sentences of val used for translate / evaluate


def main():
    args, prefix, w = cli_setup.parse_and_prepare()
    check = cli_setup.Checks()
    def run(*argv, **kw):
        r = subprocess.run([args.normlab, *map(str, argv)], capture_output=True, text=True, timeout=300, **kw)
        if r.returncode != 0:
            sys.exit(f"FAIL: normlab {' '.join(map(str, argv))} exited {r.returncode}: {r.stderr}")
        return r

    beam = ["--beam", 2, "--max-len-a", 1.2, "--max-len-b", 5]
    run("train", "--train", prefix, "--valid", prefix, "--vocab-size", 300, "--d-model", 32, "--ffn-dim", 64,
        "--heads", 2, "--encoder-layers", 1, "--decoder-layers", 1, "--share", "all", "--max-tokens", 1000,
        "--lr", 3e-3, "--warmup-steps", 20, "--max-epochs", 2, "--eval-bleu", "--best-metric", "bleu", *beam,
        "--threads", 1, "--device", "cpu", "--out", w("run"))
    valid = [json.loads(l) for l in open(w("run/metrics.jsonl")) if "valid_loss" in l]
    bleus = [v.get("valid_bleu") for v in valid]
    check(len(bleus) == 2 and all(isinstance(b, float) and 0 <= b <= 100 for b in bleus),
          f"valid_bleu in every validation record: {bleus}")
    best_epoch = 1 + max(range(len(bleus)), key=lambda i: (bleus[i], -i))
    with open(w("run/checkpoints/checkpoint_best.pt"), "rb") as a, \
            open(w(f"run/checkpoints/checkpoint{best_epoch}.pt"), "rb") as b:
        check(a.read() == b.read(), f"checkpoint_best.pt is epoch {best_epoch}'s (bleu {bleus})")
    config = json.load(open(w("run/config.json")))
    check(config["eval"] == {"eval_bleu": True, "beam": 2, "lenpen": 1.0, "max_len_a": 1.2, "max_len_b": 5,
                             "best_metric": "bleu"}, f"config.json eval section: {config.get('eval')}")

    src = gzip.open(prefix + ".de.gz", "rt", encoding="utf-8").read().splitlines()[:LINES]
    ref = gzip.open(prefix + ".en.gz", "rt", encoding="utf-8").read().splitlines()[:LINES]
    for name, lines in (("src.de", src), ("ref.en", ref)):
        with open(w(name), "w", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
    ckpt = w("run/checkpoints/checkpoint_best.pt")

    # translate: the empty line stays in place, and the rest is evaluate's text.
    with_empty = src[:10] + [""] + src[10:]
    r = run("translate", "--checkpoint", ckpt, *beam, "--threads", 1, input="\n".join(with_empty) + "\n")
    out = r.stdout.split("\n")[:-1]
    check(len(out) == len(with_empty) and out[10] == "", f"translate: {len(out)} lines, line 11 {out[10:11]!r}")
    ev = json.loads(run("evaluate", "--checkpoint", ckpt, "--src", w("src.de"), "--ref", w("ref.en"), *beam,
                        "--hyp-out", w("hyp.en"), "--json", "--threads", 1).stdout)
    hyp = open(w("hyp.en"), encoding="utf-8").read().split("\n")[:-1]
    check(hyp == out[:10] + out[11:], "evaluate --hyp-out equals translate's lines")

    import sacrebleu  # the reference implementation of the scores
    bleu = sacrebleu.corpus_bleu(hyp, [ref]).score
    chrf = sacrebleu.corpus_chrf(hyp, [ref]).score
    check(abs(ev["bleu"] - bleu) < 1e-9, f"BLEU {ev['bleu']} vs sacreBLEU {bleu}")
    check(abs(ev["chrf"] - chrf) < 1e-9, f"chrF {ev['chrf']} vs sacreBLEU {chrf}")

    # The loss: `normlab score` on the same pairs as ids (label smoothing as trained: 0.1 uniform).
    spm = w("run/vocab/spm.model")
    for name, ids in (("src.de", "src.ids"), ("ref.en", "ref.ids")):
        with open(w(ids), "w") as f:
            f.write(run("bpe", "encode", "--model", spm, "--input", w(name), "--ids").stdout)
    score = json.loads(run("score", "--checkpoint", ckpt, "--src-ids", w("src.ids"), "--tgt-ids", w("ref.ids"),
                           "--json").stdout.splitlines()[-1])
    check(ev["loss_tokens"] == score["tokens"], f"tokens {ev['loss_tokens']} vs score {score['tokens']}")
    check(abs(ev["loss"] - score["loss"] / score["tokens"]) < 1e-5 * ev["loss"],
          f"loss {ev['loss']} vs score {score['loss'] / score['tokens']}")
    check(abs(ev["nll"] - score["nll"] / score["tokens"]) < 1e-5 * ev["nll"],
          f"nll {ev['nll']} vs score {score['nll'] / score['tokens']}")

    return check.finish(f"valid_bleu {bleus}, test BLEU {ev['bleu']:.2f} chrF {ev['chrf']:.2f}")


if __name__ == "__main__":
    sys.exit(main())
