"""Shared start of the CLI tests that train on Multi30k val: arguments, data check, a fresh workdir."""
import argparse
import os
import shutil


def parse_and_prepare(add_arguments=None):
    """Returns (args, prefix of multi30k/val, w(name) -> path in the workdir), or None when the
    data folder is absent (the caller prints SKIP's reason and returns 0)."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--normlab", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--workdir", required=True)
    if add_arguments:
        add_arguments(ap)
    args = ap.parse_args()
    prefix = os.path.join(args.data, "multi30k", "val")
    if not os.path.exists(prefix + ".de.gz"):
        print(f"SKIP: no data at {args.data}")
        return None
    shutil.rmtree(args.workdir, ignore_errors=True)
    os.makedirs(args.workdir)
    return args, prefix, lambda name: os.path.join(args.workdir, name)
