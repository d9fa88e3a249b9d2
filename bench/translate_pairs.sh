#!/bin/bash
# Two normlab binaries decoding the same input alternately, one thread, each run a fresh
# `normlab translate` process timed by its wall clock (model loading included), for
# beam 5 and 1 in fp32 and bf16; says whether their translations are identical.
# Usage: bench/translate_pairs.sh BINARY_A BINARY_B CHECKPOINT INPUT [ROUNDS=3] [OUT_DIR=/tmp/translate_pairs]
# Prints "beam B PRECISION round R BINARY SECONDS" lines; average them per binary (awk, docs/performance.md).
set -euo pipefail
if [ $# -lt 4 ]; then sed -n '2,6p' "$0" >&2; exit 2; fi
A=$1; B=$2; CHECKPOINT=$3; INPUT=$4; ROUNDS=${5:-3}; OUT=${6:-/tmp/translate_pairs}
for f in "$A" "$B" "$CHECKPOINT" "$INPUT"; do [ -e "$f" ] || { echo "translate_pairs.sh: no such file: $f" >&2; exit 2; }; done
mkdir -p "$OUT"
for beam in 5 1; do
  for p in fp32 bf16; do
    for round in $(seq "$ROUNDS"); do
      for side in A B; do
        bin=${!side}
        start=$(date +%s.%N)
        "$bin" --threads 1 translate --checkpoint "$CHECKPOINT" --input "$INPUT" --precision "$p" --beam "$beam" \
          --output "$OUT/$side.$p.$beam.txt" 2>/dev/null
        end=$(date +%s.%N)
        echo "beam $beam $p round $round $bin $(echo "$end - $start" | bc)"
      done
    done
    if cmp -s "$OUT/A.$p.$beam.txt" "$OUT/B.$p.$beam.txt"; then echo "beam $beam $p identical"; else echo "beam $beam $p differing"; fi
  done
done
