#!/usr/bin/env python3
"""normlab average on real data (Multi30k val, a tiny model trained 3 epochs with update
checkpoints): the written parameters equal fairseq's averaging (scripts/average_checkpoints.py:
the inputs' tensors summed in the order given, then divided by their count) computed here by
PyTorch from torch.load of the inputs, bit for bit, and the plain mean in float64 within 1e-6;
the newest N by epoch / by update, --checkpoint-upper-bound; the averaged checkpoint carries the
vocabulary and decodes (normlab evaluate); bad inputs are one line and exit 2, writing nothing."""
import os
import subprocess
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import cli_setup  # noqa: E402

META, EXTRA, VOCAB = "__normlab_meta__", "extra/", "extra/vocab/spm.model"


def params(ckpt):
    return {k: v for k, v in ckpt.items() if k != META and not k.startswith(EXTRA)}


def meta(ckpt):
    import json
    return json.loads(bytes(ckpt[META].tolist()).decode())


def fairseq_average(paths):
    """fairseq's loop: the first input's tensors cloned, the others added in order, div_ by the count."""
    total = None
    for p in paths:
        ps = params(torch.load(p))
        if total is None:
            total = {k: v.clone() for k, v in ps.items()}
        else:
            for k, v in ps.items():
                total[k] += v
    for v in total.values():
        v.div_(len(paths))
    return total


def main():
    args, prefix, w = cli_setup.parse_and_prepare()
    check = cli_setup.Checks()
    base = ["--train", prefix, "--valid", prefix, "--max-tokens", "1000", "--threads", "1", "--device", "cpu",
            "--vocab-size", "300", "--ffn-dim", "32", "--heads", "2", "--layers", "1", "--warmup-steps", "2"]
    common = [*base, "--d-model", "16", "--lr", "2e-3"]
    r = subprocess.run([args.normlab, "train", *common, "--max-epochs", "3", "--save-interval-updates", "5",
                        "--out", w("run")], capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        print(f"FAIL: training: {r.stderr}")
        return 1
    ckpts = w("run/checkpoints")
    names = sorted(os.listdir(ckpts))
    epochs = sorted((int(n[10:-3]), n) for n in names if n[10:-3].isdigit())
    updates = sorted((int(n.split("_")[2][:-3]), n) for n in names if n.count("_") == 2)
    check([e for e, _ in epochs] == [1, 2, 3], f"epoch checkpoints: {names}")
    check(len(updates) >= 4, f"update checkpoints: {names}")

    def average(*extra):
        return subprocess.run([args.normlab, "average", *extra], capture_output=True, text=True, timeout=120)

    def same_as(out, paths, what):
        got = params(torch.load(out))
        want = fairseq_average(paths)
        check(sorted(got) == sorted(want) and len(got) > 10, f"{what}: parameter names differ")
        for k, v in want.items():
            if k not in got:
                continue
            check(got[k].dtype == torch.float32 and torch.equal(got[k], v), f"{what}: {k} differs from fairseq's average")
            mean64 = sum(params(torch.load(p))[k].double() for p in paths) / len(paths)
            err = ((got[k].double() - mean64).abs().max() / mean64.abs().max().clamp_min(1e-30)).item()
            check(err < 1e-6, f"{what}: {k} is {err:.2e} from the float64 mean")
        m = meta(torch.load(out))
        check(m.get("averaged_from") == paths, f"{what}: averaged_from {m.get('averaged_from')} != {paths}")
        check("position" not in m, f"{what}: an average must not be a training position")

    # The two newest epochs, newest first (fairseq's order).
    r = average("--inputs", ckpts, "--num-epoch-checkpoints", "2", "--out", w("avg_epochs.pt"))
    check(r.returncode == 0, f"--num-epoch-checkpoints 2: {r.stderr}")
    if r.returncode == 0:
        same_as(w("avg_epochs.pt"), [os.path.join(ckpts, epochs[2][1]), os.path.join(ckpts, epochs[1][1])], "epochs")
        first = torch.load(os.path.join(ckpts, epochs[2][1]))
        avg = torch.load(w("avg_epochs.pt"))
        check(torch.equal(avg[VOCAB], first[VOCAB]), "the average lost the vocabulary")
        check(meta(avg)["config"] == meta(first)["config"], "the average lost the training configuration")
    # By update, three of them, and the upper bound.
    r = average("--inputs", ckpts, "--num-update-checkpoints", "3", "--out", w("avg_updates.pt"))
    check(r.returncode == 0, f"--num-update-checkpoints 3: {r.stderr}")
    if r.returncode == 0:
        same_as(w("avg_updates.pt"), [os.path.join(ckpts, n) for _, n in updates[::-1][:3]], "updates")
    r = average("--inputs", ckpts, "--num-epoch-checkpoints", "2", "--checkpoint-upper-bound", "2",
                "--out", w("avg_bound.pt"))
    check(r.returncode == 0, f"--checkpoint-upper-bound 2: {r.stderr}")
    if r.returncode == 0:
        same_as(w("avg_bound.pt"), [os.path.join(ckpts, epochs[1][1]), os.path.join(ckpts, epochs[0][1])], "bound")
    # Files given one by one, in the order given.
    listed = [os.path.join(ckpts, epochs[0][1]), os.path.join(ckpts, epochs[2][1]), os.path.join(ckpts, updates[0][1])]
    r = average("--inputs", *listed, "--out", w("avg_list.pt"))
    check(r.returncode == 0, f"--inputs of three files: {r.stderr}")
    if r.returncode == 0:
        same_as(w("avg_list.pt"), listed, "list")

    # It decodes: normlab evaluate on the averaged checkpoint (its own vocabulary).
    r = subprocess.run([args.normlab, "evaluate", "--checkpoint", w("avg_epochs.pt"), "--src", prefix + ".de.gz",
                        "--ref", prefix + ".en.gz", "--beam", "1", "--max-len-a", "0", "--max-len-b", "8",
                        "--threads", "1"], capture_output=True, text=True, timeout=300)
    check(r.returncode == 0 and "BLEU" in r.stdout + r.stderr, f"evaluate on the average: {r.returncode} {r.stderr}")

    # Bad input: one line naming the cause, exit 2, nothing written.
    other = subprocess.run([args.normlab, "train", *base, "--d-model", "8", "--max-steps", "1", "--out", w("other")],
                           capture_output=True, text=True, timeout=120)
    check(other.returncode == 0, f"second model: {other.stderr}")
    with open(w("not_a_checkpoint.pt"), "w") as f:
        f.write("hello\n")
    bad = [
        (["--inputs", ckpts, "--num-epoch-checkpoints", "4"], "3 found"),
        (["--inputs", ckpts, "--num-update-checkpoints", "-1"], "--num-update-checkpoints"),
        (["--inputs", ckpts, "--num-epoch-checkpoints", "0", "--checkpoint-upper-bound", "2"], "--checkpoint-upper-bound"),
        (["--inputs", ckpts, listed[0], "--num-epoch-checkpoints", "2"], "one folder"),
        (["--inputs", listed[0], w("other/checkpoints/checkpoint_last.pt")], "another model configuration"),
        (["--inputs", listed[0], w("not_a_checkpoint.pt")], "not_a_checkpoint.pt"),
        (["--inputs", listed[0], w("missing.pt")], "missing.pt"),
        (["--inputs", w("run/vocab"), "--num-update-checkpoints", "1"], "found"),
    ]
    for extra, needle in bad:
        r = average(*extra, "--out", w("bad.pt"))
        lines = r.stderr.strip().splitlines()
        check(r.returncode == 2 and len(lines) == 1 and needle in r.stderr,
              f"{extra}: want exit 2 and one line with '{needle}', got {r.returncode}: {r.stderr!r}")
        check(not os.path.exists(w("bad.pt")), f"{extra}: wrote the output")
    # An average kept in the run's checkpoints folder: training on from it neither resumes from it
    # (no training position) nor prunes it with --keep-last (only the numbered checkpoints).
    r = average("--inputs", ckpts, "--num-epoch-checkpoints", "3", "--out", os.path.join(ckpts, "average3.pt"))
    check(r.returncode == 0, f"average into the run folder: {r.stderr}")
    kept = torch.load(os.path.join(ckpts, "average3.pt"))
    r = subprocess.run([args.normlab, "train", *common, "--max-epochs", "4", "--save-interval-updates", "5",
                        "--keep-last", "1", "--out", w("run")], capture_output=True, text=True, timeout=300)
    check(r.returncode == 0, f"training on: {r.stderr}")
    left = sorted(os.listdir(ckpts))
    check("average3.pt" in left, f"--keep-last removed the average: {left}")
    if "average3.pt" in left:
        again = torch.load(os.path.join(ckpts, "average3.pt"))
        check(all(torch.equal(again[k], v) for k, v in kept.items()), "the average changed")
    numbered = [n for n in left if n not in ("checkpoint_last.pt", "checkpoint_best.pt", "average3.pt")]
    check(len(numbered) == 1, f"--keep-last 1 should leave one numbered checkpoint: {left}")
    import json
    records = [json.loads(l) for l in open(w("run/metrics.jsonl"))]
    epochs_validated = [rec.get("epoch") for rec in records if "valid_loss" in rec]
    check(epochs_validated == [1, 2, 3, 4], f"training on should validate epoch 4 after 1-3: {epochs_validated}")

    return check.finish(f"{len(epochs)} epoch and {len(updates)} update checkpoints")


if __name__ == "__main__":
    sys.exit(main())
