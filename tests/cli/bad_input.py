#!/usr/bin/env python3
"""Bad input gives exit code 2 and one line on stderr naming the problem, never a crash."""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import cli_setup  # noqa: E402


def write_files(path, files):
    """Writes each name -> content (str as UTF-8 text, bytes as they are) under path(name)."""
    for name, content in files.items():
        with open(path(name), "wb") as f:
            f.write(content if isinstance(content, bytes) else content.encode("utf-8"))


def main():
    args, w = cli_setup.start()

    os.makedirs(w("a_folder"), exist_ok=True)
    write_files(w, {
        "src.txt": "5 6 7\n8 9\n",
        "tgt.txt": "7 8\n9 10 11\n",
        "tgt_short.txt": "7 8\n",
        "tgt_bad.txt": "7 8\n9 x 11\n",
        "tgt_special.txt": "7 8\n9 2 11\n",
        "garbage.ckpt": os.urandom(200),
    })
    tiny = ["--d-model", "8", "--ffn-dim", "8", "--heads", "2", "--encoder-layers", "1",
            "--decoder-layers", "1", "--vocab-size", "20"]
    ok = subprocess.run([args.normlab, "init", *tiny, "--out", w("good.ckpt")], capture_output=True)
    assert ok.returncode == 0, ok.stderr.decode()
    with open(w("good.ckpt"), "rb") as f:
        data = f.read()
    write_files(w, {
        "truncated.ckpt": data[: len(data) // 2],
    })
    ok = subprocess.run([args.normlab, "export", "--checkpoint", w("good.ckpt"), "--out", w("weights.pt")],
                        capture_output=True)
    assert ok.returncode == 0, ok.stderr.decode()

    # bpe: a tiny corpus, a model trained on it (which must round-trip), and broken inputs.
    words_de = ["ein", "Mann", "eine", "Frau", "spielt", "liest", "im", "Park", "Hund", "läuft"]
    words_en = ["a", "man", "woman", "plays", "reads", "in", "the", "park", "dog", "runs"]
    lines_de = [" ".join(words_de[(i * k) % 10] for k in range(1, 6)) + "." for i in range(1, 60)]
    lines_en = [" ".join(words_en[(i * k) % 10] for k in range(1, 6)) + "." for i in range(1, 60)]
    with open(w("c.de"), "w", encoding="utf-8") as f:
        f.write("\n".join(lines_de) + "\n")
    with open(w("c.en"), "w", encoding="utf-8") as f:
        f.write("\n".join(lines_en) + "\n")
    write_files(w, {
        "short.de": "ein Mann\nzwei\n",
        "short.en": "a man\n",
        "utf8.de": b"gut\nschlecht \xc3\x28\n",
        "utf8.en": "good\nbad\n",
        "ids_big.txt": "5 6\n99999\n",
        "ids_mixed.txt": "5 x\n",
        "hyp3.txt": "a b\nc d\ne f\n",
        "ref2.txt": "a b\nc d\n",
        "garbage.model": os.urandom(300),
        "blank.txt": "\n  \n",
    })
    ok = subprocess.run([args.normlab, "bpe", "train", "--train", w("c"), "--src", "de", "--tgt", "en",
                         "--vocab-size", "40", "--out", w("bpe")], capture_output=True)
    assert ok.returncode == 0, ok.stderr.decode()
    model = w("bpe/spm.model")
    ids = subprocess.run([args.normlab, "bpe", "encode", "--model", model, "--input", w("c.de"), "--ids"],
                         capture_output=True, text=True)
    assert ids.returncode == 0, ids.stderr
    back = subprocess.run([args.normlab, "bpe", "decode", "--model", model], input=ids.stdout,
                          capture_output=True, text=True)
    assert back.returncode == 0 and back.stdout.splitlines() == lines_de, back.stderr

    ok = subprocess.run([args.normlab, "init", *tiny[:-2], "--vocab-size", "40", "--share", "all",
                         "--out", w("good40.ckpt")], capture_output=True)
    assert ok.returncode == 0, ok.stderr.decode()
    translate = lambda *more: ["translate", "--checkpoint", w("good.ckpt"), "--ids", "--input", w("src.txt"), *more]
    # --dist-backend nccl on the CPU: refused when parsed without NCCL, when connecting with it.
    info = json.loads(subprocess.run([args.normlab, "info", "--json", "--no-gemm"], capture_output=True,
                                     text=True, check=True).stdout)
    no_nccl = ("--dist-backend nccl needs a CUDA device (--device cuda), got cpu" if info["nccl"] else
               "--dist-backend nccl: this normlab was built without NCCL")
    evaluate = lambda src, ref, *more: ["evaluate", "--checkpoint", w("good40.ckpt"), "--vocab", model,
                                        "--src", w(src), "--ref", w(ref), *more]
    train = lambda *more: ["train", "--train", w("c"), "--valid", w("c"), "--out", w("run"), "--max-epochs", "1",
                           *tiny[:-2], *more]
    lm_train = lambda text, *more: ["train", "--model-kind", "decoder-only", "--train", w(text), "--valid", w(text),
                                    "--out", w("lm_run"), "--max-steps", "1", "--layers", "1", *tiny[:6],
                                    "--vocab-size", "40", *more]
    ok = subprocess.run([args.normlab, "init", "--model-kind", "decoder-only", "--layers", "1", *tiny[:6],
                         "--vocab-size", "20", "--max-positions", "16", "--out", w("lm.ckpt")], capture_output=True)
    assert ok.returncode == 0, ok.stderr.decode()
    mlm_train = lambda text, *more: ["train", "--model-kind", "encoder-only", "--train", w(text), "--valid", w(text),
                                     "--out", w("mlm_run"), "--max-steps", "1", "--layers", "1", *tiny[:6],
                                     "--vocab-size", "40", *more]
    ok = subprocess.run([args.normlab, "init", "--model-kind", "encoder-only", "--layers", "1", *tiny[:6],
                         "--vocab-size", "20", "--out", w("mlm.ckpt")], capture_output=True)
    assert ok.returncode == 0, ok.stderr.decode()
    umup = ["--parametrisation", "u-mup", "--scheme", "pre-ln", "--form", "gpt2", "--dropout", "0"]
    ok = subprocess.run([args.normlab, "init", "--model-kind", "decoder-only", "--layers", "1", *tiny[:6], *umup,
                         "--share", "none", "--vocab-size", "20", "--max-positions", "16", "--out", w("umup.ckpt")],
                        capture_output=True)
    assert ok.returncode == 0, ok.stderr.decode()
    write_files(w, {"long_prompt.txt": " ".join(["5"] * 16) + "\n", "big_id.txt": "5 6\n7 25\n"})
    generate = lambda *more: ["generate", "--checkpoint", w("lm.ckpt"), "--ids", "--input", w("src.txt"), *more]
    bpe_train = lambda prefix, *more: ["bpe", "train", "--train", w(prefix), "--src", "de", "--tgt", "en",
                                       "--out", w("bpe_out"), *more]
    score = lambda ckpt, tgt="tgt.txt": ["score", "--checkpoint", w(ckpt), "--src-ids", w("src.txt"),
                                         "--tgt-ids", w(tgt)]
    tiny_layers = tiny[:-2]  # sizes without --vocab-size
    probe = lambda *more: ["probe", *tiny_layers, "--vocab-size", "40", "--out", w("probe"), *more]
    hessian = lambda *more: ["hessian", "--data", w("c"), "--out", w("hessian_out"), *more]
    cases = [
        # Issue 34: a model larger than the machine's memory is refused before allocating
        # (it aborted with SIGABRT in LibTorch's allocator).
        (["init", "--preset", "deep-narrow", "--layers", "1", "--d-model", "16", "--ffn-dim", "100000000000",
          "--heads", "2", "--vocab-size", "100", "--out", w("x")], "GiB in fp32, more than this machine's"),
        # ... and no translation could end (fairseq asserts min_len <= max_len).
        (translate("--min-len", "300", "--max-len-b", "5"),
         "--min-len 300 exceeds the longest translation allowed, --max-len-b 5 (with --max-len-a 0)"),
        (translate("--min-len", "2000", "--max-len-a", "1"), "--min-len 2000 exceeds the model's longest output, 1023 tokens"),
        # ... and with --max-len-a > 0 each sentence's longest translation (empty lines, exit 0).
        (translate("--min-len", "300", "--max-len-a", "1", "--max-len-b", "5"),
         "--min-len 300 exceeds the longest translation allowed for a source of 3 tokens with </s>, 8 "
         "(--max-len-a 1, --max-len-b 5)"),
        # ... and options a command does not use were never checked: a range is checked as it is
        # parsed (--lenpen without --eval-bleu), and a model flag beside --checkpoint is refused.
        (train("--lenpen", "-inf"), "--lenpen: must be finite, got -inf"),
        (train("--max-len-a", "nan"), "--max-len-a: must be finite and >= 0, got nan"),
        (hessian("--checkpoint", w("good.ckpt"), "--layers", "3", "--d-model", "16"),
         "--d-model, --layers: the model comes from --checkpoint " + w("good.ckpt") + "; drop them"),
        # ... and a folder given for a file was basic_filebuf's "Is a directory".
        (translate()[:-2] + ["--input", w("a_folder")], "cannot read " + w("a_folder") + ": it is a directory"),
        # ... and an infinite timeout overflowed to -2^63 ms.
        (train("--dist-timeout", "inf"), "--dist-timeout must be > 0 seconds and at most 31536000 (a year), got inf"),
        (["init", "--scheme", "post_ln", *tiny, "--out", w("x")], "unknown scheme 'post_ln'"),
        (["init", "--preset", "huge", *tiny, "--out", w("x")], "unknown preset 'huge'"),
        (["init", "--embed-init", "glorot", *tiny, "--out", w("x")], "--embed-init: unknown value 'glorot', expected normal|xavier"),
        (["init", "--d-model", "10", "--heads", "3", "--vocab-size", "20", "--out", w("x")],
         "not divisible by --heads 3"),
        (["init", *tiny[:6], "--encoder-layers", "0", "--vocab-size", "20", "--out", w("x")],
         "--encoder-layers must be positive"),
        (["init", *tiny, "--layers", "3", "--out", w("x")], "--encoder-layers excludes --layers"),
        (["init", *tiny[:6], "--layers", "0", "--vocab-size", "20", "--out", w("x")], "--encoder-layers must be positive"),
        (["init", "--ffn-dim", "-4", "--d-model", "8", *tiny[4:], "--out", w("x")], "--ffn-dim must be positive"),
        (["init", "--scheme", "pre-ln", "--init", "t-fixup", *tiny, "--out", w("x")], "without LayerNorm"),
        (["init", "--scheme", "rezero", "--norm", "post", *tiny, "--out", w("x")], "needs --norm none"),
        (["init", "--norm-kind", "batchnorm", *tiny, "--out", w("x")],
         "--norm-kind: unknown value 'batchnorm', expected layernorm|rmsnorm|dyt"),
        (["init", "--scheme", "post-ln", "--ln-scaling", *tiny, "--out", w("x")], "it needs --norm pre"),
        (["init", "--scheme", "pre-ln", "--mix-ln-alpha", "0.5", *tiny, "--out", w("x")],
         "--mix-ln-alpha applies to --norm mix only"),
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
        (["bpe"], "A subcommand is required"),
        (bpe_train("missing"), "cannot find " + w("missing.de")),
        (bpe_train("short"), "short.de has 2 lines but"),
        (bpe_train("utf8"), "utf8.de:2: invalid UTF-8 at byte 10"),
        (bpe_train("c", "--vocab-size", "4"), "--vocab-size must be > 4"),
        (bpe_train("c", "--vocab-size", "5000"), "Vocabulary size too high (5000)"),
        (bpe_train("c", "--vocab-size", "8"), "Vocabulary size is smaller than required_chars"),
        (bpe_train("c", "--character-coverage", "1.5"), "--character-coverage must be in (0, 1]"),
        (bpe_train("c")[:-2], "--out is required"),
        (["bpe", "encode", "--model", w("missing.model"), "--input", w("c.de")], "cannot read " + w("missing.model")),
        (["bpe", "encode", "--model", w("garbage.model"), "--input", w("c.de")], "not a SentencePiece model"),
        (["bpe", "encode", "--model", model, "--input", w("utf8.de")], "utf8.de:2: invalid UTF-8"),
        (["bpe", "encode", "--model", model, "--input", w("nothing.txt")], "cannot read " + w("nothing.txt")),
        (["bpe", "decode", "--model", model, "--input", w("ids_big.txt")],
         "ids_big.txt:2: token id 99999 is outside the vocabulary of 40"),
        (["bpe", "decode", "--model", model, "--input", w("ids_mixed.txt"), "--format", "ids"],
         "ids_mixed.txt:1: expected a token id, found 'x'"),
        (["bpe", "decode", "--model", model, "--format", "xml"], "--format must be auto, ids or pieces"),
        (["bleu", "--ref", w("ref2.txt"), "--hyp", w("hyp3.txt")],
         w("ref2.txt") + " has 2 lines but " + w("hyp3.txt") + " has 3"),
        (["bleu", "--ref", w("ref2.txt"), "--hyp", w("missing.hyp")], w("missing.hyp")),
        (["bleu", "--ref", w("missing.ref"), "--hyp", w("hyp3.txt")], w("missing.ref")),
        (["bleu", "--ref", w("ref2.txt"), "--hyp", w("ref2.txt"), "--tokenize", "intl"], "--tokenize"),
        (["bleu", "--ref", w("ref2.txt"), "--hyp", w("utf8.de")], "utf8.de:2: invalid UTF-8"),
        (probe("--seeds", "0"), "--seeds must be >= 1, got 0"),
        (probe("--schemes", "post-ln,post_ln"), "unknown scheme 'post_ln'"),
        (probe("--analysis-setting", "--schemes", "admin"), "for schemes with norms and a plain residual"),
        # The scheme flags apply to every scheme of --schemes, and are checked for each.
        (probe("--schemes", "pre-ln,t-fixup", "--norm-kind", "rmsnorm"),
         "--schemes t-fixup: --norm-kind rmsnorm with --norm none: there is no norm to make one"),
        (probe("--sweep", "--sweep-d", "5"), "--sweep-d: every width must be even and >= 4, got 5"),
        # Issue 34: an option that only qualifies another is refused without it.
        (probe("--sweep-layers", "1,2"), "--sweep-layers requires --sweep"),
        (probe("--lanczos-steps", "5"), "--lanczos-steps requires --critical-lr"),
        (probe("--critical-lr-tol", "0.1"), "--critical-lr-tol requires --critical-lr"),
        (probe("--train", w("missing")), "cannot find " + w("missing.de")),
        (probe("--train", w("c"), "--vocab", w("garbage.model")), "not a SentencePiece model"),
        (probe("--vocab", model), "--vocab needs --train"),
        # Issue 35: the instruments on single-stack models' running text.
        (probe("--block-size", "8"), "--block-size: the positions of a block of running text"),
        (["probe", "--model-kind", "encoder-only", "--layers", "1", *tiny[:6], "--num-classes", "2", "--out", w("probe")],
         "--num-classes: the instruments feed a masked LM's blocks or random tokens, not a classifier's examples"),
        (["probe", "--model-kind", "decoder-only", "--layers", "1", *tiny[:6], "--train", w("blank.txt"), "--out", w("probe")],
         w("blank.txt") + ": no text to model (2 lines, none with text)"),
        (["probe", "--model-kind", "decoder-only", "--layers", "1", *tiny[:6], "--train", w("c.en"), "--vocab", model,
          "--max-positions", "2048", "--block-size", "2000", "--out", w("probe")],
         "fewer than --block-size 2000 + 1 (one block)"),
        (["perturb", "--model-kind", "decoder-only", "--layers", "1", *tiny[:6], "--max-positions", "64",
          "--length", "100", "--out", w("perturb")], "--length 100 exceeds --max-positions 64"),
        (hessian("--vocab", model, "--block-size", "8"), "--block-size: the positions of a block of running text"),
        (["hessian", "--data", w("c.en"), "--out", w("hessian_out"), "--model-kind", "decoder-only", "--layers", "1",
          *tiny[:6], "--vocab", model, "--max-positions", "16", "--block-size", "32"],
         "--block-size 32 exceeds the model's max_positions 16"),
        # Issue 35: a decoder-only model's running text and the options it does not read.
        (lm_train("blank.txt"), w("blank.txt") + ": no text to model (2 lines, none with text)"),
        (lm_train("c.en", "--block-size", "64", "--max-positions", "32"), "--block-size 64 exceeds --max-positions 32"),
        (lm_train("c.en", "--eval-bleu"), "--eval-bleu applies to sentence pairs; a decoder-only model reads running text"),
        (lm_train("c.en", "--max-pairs", "5"), "--max-pairs applies to sentence pairs"),
        (train("--block-size", "8"), "--block-size cuts running text for --model-kind decoder-only"),
        # Issue 36: u-muP where the package does not define it (docs/width.md).
        (lm_train("c.en", *umup), "--parametrisation u-mup needs --share none (the readout's lr and multiplier are "
                                  "not the table's)"),
        (lm_train("c.en", *umup, "--share", "none", "--optimizer", "sgd"),
         "--parametrisation u-mup: --optimizer sgd has no u-muP rule here"),
        (lm_train("c.en", *umup, "--share", "none", "--umup-alpha-res", "0"), "--umup-alpha-res must be positive, got 0"),
        (lm_train("c.en", "--umup-alpha-ffn-act", "2"), "--umup-alpha-* applies to --parametrisation u-mup only"),
        (["generate", "--checkpoint", w("umup.ckpt"), "--ids", "--input", w("src.txt")],
         "generate: a --parametrisation u-mup model's attention scale depends on the length of the whole sequence"),
        (["init", "--model-kind", "decoder-only", *tiny, "--out", w("x")],
         "--encoder-layers: a decoder-only model has no encoder, got 1"),
        (["init", "--model-kind", "decoder-only", "--layers", "1", *tiny[:6], "--vocab-size", "20", "--share", "all",
          "--out", w("x")], "--share all: a decoder-only model has one token table"),
        # Issue 35: an encoder-only (masked LM) model's masking options and inputs.
        (mlm_train("c.en", "--mask-prob", "0"), "--mask-prob must be positive"),
        (mlm_train("c.en", "--leave-unmasked-prob", "0.6", "--random-token-prob", "0.6"),
         "--leave-unmasked-prob + --random-token-prob must be at most 1"),
        (mlm_train("c.en", "--block-size", "1"), "--block-size must be at least 2 for a masked LM"),
        (lm_train("c.en", "--mask-prob", "0.2"), "--random-token-prob apply to --model-kind encoder-only, not decoder-only"),
        (["init", "--model-kind", "encoder-only", *tiny, "--out", w("x")],
         "--decoder-layers: an encoder-only model has no decoder, got 1"),
        (["init", "--model-kind", "decoder-only", "--layers", "1", *tiny[:6], "--vocab-size", "20", "--init", "bert",
          "--out", w("x")], "--init bert is BERT's initialisation of an encoder: it needs --model-kind encoder-only"),
        (["score", "--checkpoint", w("mlm.ckpt"), "--src-ids", w("src.txt"), "--tgt-ids", w("tgt.txt")],
         "targets for 3 input tokens in " + w("src.txt") + " (one per input token: the id to predict, or -100)"),
        (["eval-lm", "--checkpoint", w("good.ckpt"), "--text", w("c.en")],
         "needs a decoder-only or encoder-only model, not encoder-decoder"),
        # Classifiers and their tasks (docs/finetune.md, docs/data.md "Downstream tasks").
        (["init", "--model-kind", "decoder-only", "--layers", "1", *tiny[:6], "--vocab-size", "20",
          "--num-classes", "2", "--out", w("x")], "a classification head sits on an encoder-only model"),
        (["init", "--model-kind", "encoder-only", "--layers", "1", *tiny[:6], "--vocab-size", "20",
          "--num-classes", "1", "--out", w("x")], "--num-classes must be 0 (no classifier) or at least 2, got 1"),
        (["finetune", "--train", w("c.en"), "--valid", w("c.en"), "--max-steps", "1", "--out", w("ft")],
         "finetune needs --init-from CKPT"),
        (["lm-tasks", "--data", w("no_such_folder"), "--out", w("tasks")], "no such file"),
        (["lm-tasks", "--data", w("no_such_folder"), "--out", w("tasks"), "--min-words", "0"], "--min-words"),
        # normlab generate: options it would not read, prompts that do not fit (docs/generate.md).
        (["generate", "--checkpoint", w("good.ckpt"), "--ids", "--input", w("src.txt")],
         "normlab generate needs a decoder-only model, not encoder-decoder"),
        (generate("--top-k", "5"), "--temperature, --top-k and --top-p need --sampling"),
        (generate("--num-samples", "3"), "--num-samples needs --sampling"),
        (generate("--sampling", "--beam", "2"), "--sampling draws one continuation at a time: --beam must be 1"),
        (generate("--beam", "2", "--ignore-eos"), "--ignore-eos: beam search ends every hypothesis with </s>"),
        (generate("--min-len", "5", "--max-new-tokens", "3"), "--min-len 5 exceeds --max-new-tokens 3"),
        (generate("--sampling", "--top-p", "0"), "--top-p must be in (0, 1]"),
        (generate("--sampling", "--temperature", "0"), "--temperature must be > 0 and finite"),
        (generate("--prompt", "5 6"), "give --prompt or --input, not both"),
        (generate("--format", "xml"), "--format: xml not in {text,jsonl}"),
        (["generate", "--checkpoint", w("lm.ckpt"), "--ids", "--input", w("long_prompt.txt")],
         "prompt 1 has 16 tokens: the model's max_positions 16 leave no room"),
        (["generate", "--checkpoint", w("lm.ckpt"), "--ids", "--input", w("big_id.txt")], w("big_id.txt") + ":2"),
        (probe()[:-2], "--out is required"),
        (["perturb", *tiny_layers, "--out", w("p"), "--delta", "gauss"], "--delta: unknown value 'gauss'"),
        (["perturb", *tiny_layers, "--out", w("p"), "--depths", "2,0"], "--depths: every depth must be >= 1, got 0"),
        (["train", "--train", w("c"), "--valid", w("c"), "--max-steps", "1", "--out", w("t2"),
          "--trace-steps", "-1"], "--trace-steps must be >= 0, got -1"),
        (translate("--beam", "0"), "--beam: must be >= 1, got 0"),
        (translate("--beam", "2", "--nbest", "3"), "--nbest must be in [1, --beam 2], got 3"),
        (translate("--max-len-b", "-1"), "--max-len-b: must be >= 0"),
        (translate("--max-len-a", "-0.5"), "--max-len-a: must be finite and >= 0"),
        (translate("--max-tokens", "3"), "input line 1 has 4 tokens with </s>, more than --max-tokens 3"),
        (translate()[:-2] + ["--input", w("tgt_bad.txt")], "tgt_bad.txt:2: expected non-negative integer"),
        (translate()[:-2] + ["--input", w("ids_big.txt")], "ids_big.txt:2: id 99999 is outside the vocabulary"),
        (["translate", "--checkpoint", w("good.ckpt"), "--input", w("c.de")],
         "holds no vocabulary and " + os.path.join(os.path.dirname(os.path.abspath(args.workdir)), "vocab", "spm.model") + " does not exist"),
        (["translate", "--checkpoint", w("good.ckpt"), "--vocab", model, "--input", w("c.de")],
         "the vocabulary has 40 pieces but " + w("good.ckpt") + " was built for 20"),
        (["translate", "--checkpoint", w("good40.ckpt"), "--vocab", model, "--input", w("utf8.de")],
         "utf8.de:2: invalid UTF-8"),
        (["translate", "--checkpoint", w("missing.ckpt"), "--input", w("c.de")], "missing.ckpt"),
        (evaluate("short.de", "short.en"), "short.de has 2 lines but " + w("short.en") + " has 1"),
        (evaluate("c.de", "missing.en"), w("missing.en")),
        (evaluate("c.de", "c.en", "--lenpen", "nan"), "--lenpen: must be finite, got nan"),
        (train("--add-encoder-layers", "2"), "add layers to a trained model: give --init-from CKPT"),
        (train("--init", "dt-fixup"), "--init dt-fixup initialises layers added to a trained model"),
        (train("--init", "dt-fixup-postln"), "--init dt-fixup-postln initialises layers added to a trained model"),
        (train("--pretrained-lr-scale", "0.5"), "--pretrained-lr-scale needs --init-from CKPT"),
        (train("--max-pairs", "-1"), "--max-pairs must be >= 0, got -1"),
        (train("--bucket-cap-mb", "0"), "--bucket-cap-mb must be in (0, 4096], got 0"),
        (train("--init-from", w("good.ckpt")), "--d-model, --ffn-dim, --heads, --encoder-layers, --decoder-layers: "
                                               "the model and its vocabulary come from --init-from"),
        (train()[:9] + ["--init-from", w("good.ckpt")], "--init-from " + w("good.ckpt") + ": holds no vocabulary"),
        (train()[:9] + ["--init-from", w("missing.ckpt")], "missing.ckpt"),
        (train()[:9] + ["--init-from", w("good.ckpt"), "--init", "fixup"],
         "--init: unknown value 'fixup' for layers added by --init-from"),
        (train()[:9] + ["--init-from", w("good.ckpt"), "--add-encoder-layers", "-1"],
         "--add-encoder-layers must be >= 0, got -1"),
        # Schedule-free AdamW replaces the schedule: another one given is refused in one line.
        (train("--optimizer", "adamw-schedulefree", "--lr-schedule", "inverse-sqrt"),
         "--optimizer adamw-schedulefree replaces the learning-rate schedule (--warmup-steps is its own warm-up): "
         "use --lr-schedule constant, got inverse-sqrt"),
        (train("--optimizer", "adamw-schedulefree", "--warmup-init-lr", "1e-7"),
         "--warmup-init-lr: --optimizer adamw-schedulefree's own warm-up starts at --lr / --warmup-steps"),
        (train("--schedule-free-r", "1"),
         "--schedule-free-r and --schedule-free-weight-lr-power apply to --optimizer adamw-schedulefree only, not adamw"),
        (train("--best-metric", "bleu"), "--best-metric bleu needs --eval-bleu"),
        (train("--best-metric", "accuracy"), "--best-metric: unknown value 'accuracy'"),
        (train("--eval-bleu", "--beam", "0"), "--beam: must be >= 1"),
    ]
    cases += [
        (hessian("--checkpoint", w("good.ckpt"), "--vocab", model),
         "the vocabulary has 40 pieces but " + w("good.ckpt") + " was built for 20"),
        (hessian("--vocab", model, *tiny[:-2], "--params", "decoder\\.("), "--params: 'decoder\\.(' is not a regular expression"),
        (hessian("--vocab", model, *tiny[:-2], "--params", "^nothing$"), "--params: '^nothing$' matches no parameter name"),
        (hessian("--vocab", model, "--steps", "0", "--sigma", "-1"), "--steps must be at least 1, got 0; --sigma must be positive"),
        (hessian("--vocab", model, *tiny[:-2], "--dtype", "float16"), "--dtype: unknown value 'float16'"),
        (hessian(*tiny[:-2]), "give --vocab FILE"),
        (hessian("--vocab", model, "--vocab-train", w("c")), "--vocab and --vocab-train exclude each other"),
        (hessian("--vocab", model, "--vocab-size", "100"), "--vocab-size requires --vocab-train"),
        (hessian("--vocab", model, "--power-tol", "0.01"), "--power-tol requires --power"),
        (hessian("--vocab", model, "--per-block-steps", "3"), "--per-block-steps requires --per-block"),
        (["hessian", "--vocab", model, "--data", w("missing"), "--out", w("hessian_out")], "cannot find " + w("missing.de")),
        (hessian("--vocab", model, *tiny[:-2], "--max-tokens", "3"), "more than --max-tokens 3"),
        (hessian("--vocab", model, *tiny[:-2], "--label-smoothing", "1"), "--label-smoothing must be in [0, 1)"),
        (hessian("--vocab", model, *tiny[:-2], "--precision", "bf16"), "--precision bf16: Hessians are computed in fp32 or fp64"),
        (["perturb", *tiny[:-2], "--out", w("perturb_out"), "--precision", "bf16"],
         "--precision bf16: perturb measures output changes"),
        (translate("--precision", "fp16", "--device", "cpu"), "--precision fp16 needs a CUDA device"),
        (translate("--precision", "fp8"), "--precision: unknown value 'fp8', expected fp32|bf16|fp16"),
        (train("--precision", "fp16", "--device", "cpu"), "--precision fp16 needs a CUDA device"),
        # int8 is for decoding only (issue 34 §6).
        (train("--precision", "int8"), "--precision int8 is for decoding only (translate, evaluate, generate)"),
        (["score", "--checkpoint", w("good.ckpt"), "--src-ids", w("src.txt"), "--tgt-ids", w("tgt.txt"),
          "--precision", "int8"], "--precision int8 is for decoding only"),
        (["probe", *tiny[:-2], "--out", w("probe_out"), "--precision", "int8"], "--precision int8 is for decoding only"),
        (["perturb", *tiny[:-2], "--out", w("perturb_out"), "--precision", "int8"],
         "--precision int8: perturb measures output changes"),
        (train("--dist-backend", "mpi"), "--dist-backend: unknown value 'mpi', expected auto|gloo|nccl"),
        (train("--dist-timeout", "0"), "--dist-timeout must be > 0 seconds"),
        # Issue 34: refused without a launcher too, as docs/distributed.md says (it trained, exit 0).
        (train("--dist-backend", "nccl", "--device", "cpu"), no_nccl),
        (["probe", *tiny[:-2], "--out", w("probe_out"), "--dist-backend", "nccl", "--device", "cpu"], no_nccl),
        (["probe", *tiny[:-2], "--out", w("probe_out"), "--precision", "fp16", "--device", "cpu"],
         "--precision fp16 needs a CUDA device"),
        (["score", "--checkpoint", w("good.ckpt"), "--src-ids", w("src.txt"), "--tgt-ids", w("tgt.txt"),
          "--precision", "half"], "--precision: unknown value 'half'"),
        (["synth", "--out", w("syn"), "--train", "0"], "--train must be positive"),
        (["synth", "--out", w("syn"), "--min-length", "2"], "3 <= --min-length <= --max-length"),
    ]
    # Recipes: every problem names FILE:LINE (the line of the offending key or table).
    good_cell = '[[cells]]\nname = "a"\noptions = { max-epochs = 1 }\n'
    recipes = {
        "r_syntax.toml": ('title = "x"\n[[cells]\n', ":2: "),
        "r_unknown_top.toml": ('title = "x"\ncolour = 1\n' + good_cell, ":2: unknown key 'colour' in the recipe"),
        "r_unknown_cell_key.toml": ('title = "x"\n[[cells]]\nname = "a"\nopts = {}\n', ":4: unknown key 'opts' in [[cells]]"),
        "r_no_cells.toml": ('title = "x"\n', ":1: the recipe needs at least one [[cells]] table"),
        "r_no_title.toml": (good_cell, ":1: the recipe needs a title"),
        "r_grid_scalar.toml": ('title = "x"\n[[cells]]\nname = "a"\ngrid = { lr = 0.1 }\n', ":4: grid lr must be a list"),
        "r_grid_empty.toml": ('title = "x"\n[[cells]]\nname = "a"\ngrid = { lr = [] }\n', ":4: cell 'a' grid: lr is an empty list"),
        "r_option_list.toml": ('title = "x"\n[[cells]]\nname = "a"\noptions = { lr = [1, 2] }\n', ":4: cell 'a' options: lr is a list"),
        "r_bad_option.toml": ('title = "x"\n[[cells]]\nname = "a"\n[cells.options]\nmax-epochs = 1\ncolour = 2\n',
                              ":6: cell 'a': train has no option --colour"),
        "r_bad_command.toml": ('title = "x"\n\n[[cells]]\nname = "a"\ncommand = "paint"\n', ":3: cell 'a': unknown command 'paint'"),
        "r_duplicate.toml": ('title = "x"\n' + good_cell + good_cell, ":5: two cells are named 'a'"),
        "r_bad_name.toml": ('title = "x"\n[[cells]]\nname = "a/b"\n', ":3: cell name 'a/b'"),
        "r_ranks_zero.toml": ('title = "x"\n[[cells]]\nname = "a"\nranks = 0\n', ":4: ranks must be an integer in 1..64"),
        "r_ranks_probe.toml": ('title = "x"\n[[cells]]\nname = "a"\ncommand = "probe"\nranks = 2\n',
                               ":5: ranks: only train and hessian cells run as several processes, not probe"),
        "r_bad_scale.toml": ('title = "x"\n' + good_cell + '[scale.huge.train]\nlr = 1\n', ":5: unknown key 'huge' in [scale]"),
        "r_scale_list.toml": ('title = "x"\n' + good_cell + '[scale.smoke.train]\nlr = [1, 2]\n',
                              ":6: lr is a list in [scale.smoke.train] but no train cell has it in its grid"),
        "r_placeholder.toml": ('title = "x"\n[[cells]]\nname = "a"\noptions = { train = "{corpus}/train" }\n',
                               ":4: unknown placeholder {corpus}"),
        "r_claim_rule.toml": ('title = "x"\n' + good_cell + '[[claims]]\ntext = "t"\nrule = "final_valid_loss(a) <"\n',
                              ":7: rule 'final_valid_loss(a) <': expected a number"),
        "r_claim_metric.toml": ('title = "x"\n' + good_cell + '[[claims]]\ntext = "t"\nrule = "bleu(a) > 1"\n',
                                ":7: rule 'bleu(a) > 1': expected a number, a metric"),
        "r_claim_over.toml": ('title = "x"\n' + good_cell + '[[claims]]\ntext = "t"\n'
                              'rule = "mean(max(final_valid_loss(a*))) > 1"\n', ":7: rule 'mean(max(final_valid_loss(a*))) > 1': "
                              "expected 'over'"),
        "r_claim_over_key.toml": ('title = "x"\n' + good_cell + '[[claims]]\ntext = "t"\n'
                                  'rule = "mean(max(final_valid_loss(a*) over)) > 1"\n', ":7: rule 'mean(max(final_valid_loss(a*) over)) > 1': expected a grid key after 'over'"),
        "r_synth_key.toml": ('title = "x"\n[synth]\nsize = 3\n' + good_cell, ":3: unknown key 'size' in [synth]"),
        # Issue 34: '.' and '..' would name the results folder itself or its parent.
        "r_dot_cell.toml": ('title = "x"\n[[cells]]\nname = "."\n', ":3: cell name '.': use letters"),
        "r_dotdot_cell.toml": ('title = "x"\n[[cells]]\nname = ".."\n', ":3: cell name '..': use letters"),
    }
    # Issue 34: grids too large are refused before they are expanded (2^24 cells took 18 s into
    # std::bad_alloc), and a problem shared by many cells is one problem with their count.
    grid = lambda n: "grid = { " + ", ".join(f"k{i:02d} = [1, 2]" for i in range(n)) + " }\n"
    recipes["r_grid_huge.toml"] = ('title = "x"\n[[cells]]\nname = "a"\n' + grid(24),
                                   ":2: cell 'a': its grid expands to 16777216 cells (the product of its 24 lists' "
                                   "sizes), more than the 10000 a recipe may hold")
    recipes["r_grid_sum.toml"] = ('title = "x"\n[[cells]]\nname = "a"\n' + grid(13) + '[[cells]]\nname = "b"\n' +
                                  grid(13), ":5: cell 'b': its grid's 8192 cells bring the recipe to 16384 cells, "
                                  "more than the 10000 a recipe may hold")
    ten = ["lr", "seed", "dropout", "warmup-steps", "max-epochs", "clip-norm", "label-smoothing", "weight-decay",
           "max-tokens", "d-model"]
    recipes["r_bad_option_grid.toml"] = (
        'title = "x"\n[[cells]]\nname = "a"\noptions = { colour = 2 }\ngrid = { ' +
        ", ".join(f"{k} = [1, 2]" for k in ten) + " }\n",
        ":4: cell 'a_clip-norm=1_d-model=1_dropout=1_label-smoothing=1_lr=1_max-epochs=1_max-tokens=1_seed=1_"
        "warmup-steps=1_weight-decay=1' and 1023 other cells: train has no option --colour")
    write_files(w, {name: text for name, (text, _) in recipes.items()})
    write_files(w, {"r_good.toml": 'title = "x"\n' + good_cell})
    run = lambda recipe, *more: ["run", w(recipe), "--out", w("run_out"), "--scale", "smoke", *more]
    cases += [(run(name, *(["--dry-run"] if "grid" in name else [])), w(name) + expected)
              for name, (_, expected) in recipes.items()]
    cases += [
        (run("r_missing.toml"), "cannot read recipe " + w("r_missing.toml")),
        (["run", w("r_no_title.toml"), "--out", w("run_out"), "--scale", "huge"], "--scale must be smoke, cpu or paper"),
        (["report", w("syn_missing")], w("syn_missing") + ": neither a `normlab run` folder"),
        (run("r_good.toml", "--jobs", "0"), "--jobs must be at least 1, not 0"),
        (run("r_good.toml", "--jobs", "-2"), "--jobs must be at least 1, not -2"),
        (run("r_good.toml", "--jobs", "x"), "--jobs"),
    ]
    shard = "--shard must be K/N with 1 <= K <= N"
    cases += [(run("r_no_title.toml", "--shard", s), f"{shard} (2/3: the second of three shards), not '{s}'")
              for s in ("0/3", "4/3", "x", "1/0", "1/", "-1/2", "1/2/3")]
    cases += [(["run", w("r_no_title.toml"), "--out", w("run_out"), "--scale", "huge", "--shard", "0/3"],
               "--scale must be smoke, cpu or paper, got 'huge'; " + shard)]
    check = cli_setup.Checks()
    for argv, expected in cases:
        try:
            r = subprocess.run([args.normlab, *argv], capture_output=True, text=True, timeout=60,
                               stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            check(False, f"{' '.join(argv)}\n  still running after 60 s\n  expected: {expected!r}")
            continue
        lines = r.stderr.strip().splitlines()
        check(r.returncode == 2 and len(lines) == 1 and expected in lines[0] and not r.stdout and
              len(r.stderr) < 1000,  # a problem shared by many cells is said once (issue 34: 166 KB)
              f"{' '.join(argv)}\n  rc={r.returncode} stderr={r.stderr!r}\n  expected: {expected!r}")
    return check.finish(f"{len(cases)} cases")


if __name__ == "__main__":
    sys.exit(main())
