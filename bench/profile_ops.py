#!/usr/bin/env python3
"""Sums a Chrome trace written by `normlab_bench --profile FILE` (LibTorch's legacy profiler)
per operator: self time (the operator's time less the operators it called, on the calling
thread), calls, and share of the traced time. Forward and backward operators are listed apart
(autograd's backward nodes are named `...Backward0`). Prints a Markdown table. With
`--callers OP`, OP's self time grouped by the operators that called it instead (its nearest
enclosing events, innermost last).

  build/normlab_bench --precision bf16 --steps 2 --profile /tmp/bf16.trace
  python3 bench/profile_ops.py /tmp/bf16.trace --steps 2
  python3 bench/profile_ops.py /tmp/bf16.trace --steps 2 --callers aten::copy_
"""
import argparse
import collections
import json


def self_times(events, key=lambda e, stack: e["name"]):
    """(key -> [self microseconds, calls]) of complete events ('X'), nesting by time per thread;
    key(event, enclosing events) names the row an event's self time goes to (None: left out)."""
    totals = collections.defaultdict(lambda: [0.0, 0])
    by_thread = collections.defaultdict(list)
    for e in events:
        if e.get("ph") == "X":
            by_thread[e.get("tid")].append(e)
    for evs in by_thread.values():
        evs.sort(key=lambda e: (e["ts"], -e["dur"]))
        stack = []  # [event, time of its children, its row]
        for e in evs:
            while stack and e["ts"] >= stack[-1][0]["ts"] + stack[-1][0]["dur"]:
                _add_self(totals, stack.pop())
            if stack:
                stack[-1][1] += e["dur"]
            row = key(e, [s[0] for s in stack])
            if row is not None:
                totals[row][1] += 1
            stack.append([e, 0.0, row])
        while stack:
            _add_self(totals, stack.pop())
    return totals


def _add_self(totals, entry):
    done, children, row = entry
    if row is not None:
        totals[row][0] += done["dur"] - children


def caller_key(op, depth=3):
    """Rows of --callers: OP's events named by their `depth` nearest enclosing events."""
    def key(e, stack):
        if e["name"] != op:
            return None
        return " < ".join(s["name"] for s in reversed(stack[-depth:])) or "(called by no operator)"
    return key


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace")
    ap.add_argument("--steps", type=int, default=1, help="steps in the trace (times are per step)")
    ap.add_argument("--top", type=int, default=30)
    ap.add_argument("--callers", metavar="OP", help="OP's self time by the operators that called it")
    args = ap.parse_args()
    with open(args.trace) as f:
        data = json.load(f)
    events = data["traceEvents"] if isinstance(data, dict) else data
    totals = self_times(events, caller_key(args.callers) if args.callers else lambda e, stack: e["name"])
    all_us = sum(t for t, _ in totals.values())
    what = f"`{args.callers}`'s" if args.callers else "traced"
    print(f"{what} self time {all_us / 1e3 / args.steps:.1f} ms per step\n")
    row = "called by (nearest first)" if args.callers else "operator"
    print(f"| {row} | ms/step (self) | share | calls/step |\n|---|---:|---:|---:|")
    for name, (us, calls) in sorted(totals.items(), key=lambda kv: -kv[1][0])[: args.top]:
        print(f"| `{name}` | {us / 1e3 / args.steps:.1f} | {100 * us / all_us:.1f}% | {calls / args.steps:g} |")


if __name__ == "__main__":
    main()
