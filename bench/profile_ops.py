#!/usr/bin/env python3
"""Sums a Chrome trace written by `normlab_bench --profile FILE` (LibTorch's legacy profiler)
per operator: self time (the operator's time less the operators it called, on the calling
thread), calls, and share of the traced time. Forward and backward operators are listed apart
(autograd's backward nodes are named `...Backward0`). Prints a Markdown table.

  build/normlab_bench --precision bf16 --steps 2 --profile /tmp/bf16.trace
  python3 bench/profile_ops.py /tmp/bf16.trace --steps 2
"""
import argparse
import collections
import json


def self_times(events):
    """(name -> [self microseconds, calls]) of complete events ('X'), nesting by time per thread."""
    totals = collections.defaultdict(lambda: [0.0, 0])
    by_thread = collections.defaultdict(list)
    for e in events:
        if e.get("ph") == "X":
            by_thread[e.get("tid")].append(e)
    for evs in by_thread.values():
        evs.sort(key=lambda e: (e["ts"], -e["dur"]))
        stack = []  # [event, time of its children]
        for e in evs:
            while stack and e["ts"] >= stack[-1][0]["ts"] + stack[-1][0]["dur"]:
                done, children = stack.pop()
                totals[done["name"]][0] += done["dur"] - children
            if stack:
                stack[-1][1] += e["dur"]
            totals[e["name"]][1] += 1
            stack.append([e, 0.0])
        while stack:
            done, children = stack.pop()
            totals[done["name"]][0] += done["dur"] - children
    return totals


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace")
    ap.add_argument("--steps", type=int, default=1, help="steps in the trace (times are per step)")
    ap.add_argument("--top", type=int, default=30)
    args = ap.parse_args()
    with open(args.trace) as f:
        data = json.load(f)
    events = data["traceEvents"] if isinstance(data, dict) else data
    totals = self_times(events)
    all_us = sum(t for t, _ in totals.values())
    print(f"traced self time {all_us / 1e3 / args.steps:.1f} ms per step\n")
    print("| operator | ms/step (self) | share | calls/step |\n|---|---:|---:|---:|")
    for name, (us, calls) in sorted(totals.items(), key=lambda kv: -kv[1][0])[: args.top]:
        print(f"| `{name}` | {us / 1e3 / args.steps:.1f} | {100 * us / all_us:.1f}% | {calls / args.steps:g} |")


if __name__ == "__main__":
    main()
