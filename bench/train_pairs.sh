#!/bin/bash
# Two normlab binaries training the same small run alternately (Multi30k val, 2+2 layers,
# d 128, 60 updates, 2 threads), each a fresh `normlab train` process into a fresh folder
# (vocabulary training included in the wall clock). What a change to the training loop is
# timed with (docs/performance.md, "The training loop as phases").
# Usage: bench/train_pairs.sh BINARY_A BINARY_B [ROUNDS=3] [DATA=../shared/data] [OUT_DIR=/tmp/train_pairs]
# Prints "round R BINARY wall SECONDS tok/s MEDIAN" lines, MEDIAN over the run's training records.
set -euo pipefail
if [ $# -lt 2 ]; then sed -n '2,7p' "$0" >&2; exit 2; fi
A=$1; B=$2; ROUNDS=${3:-3}; DATA=${4:-../shared/data}; OUT=${5:-/tmp/train_pairs}
for f in "$A" "$B" "$DATA/multi30k/val.de.gz"; do [ -e "$f" ] || { echo "train_pairs.sh: no such file: $f" >&2; exit 2; }; done
mkdir -p "$OUT"
for round in $(seq "$ROUNDS"); do
  for side in A B; do
    bin=${!side}
    run="$OUT/$side-$round"
    rm -rf "$run"
    start=$(date +%s.%N)
    "$bin" train --train "$DATA/multi30k/val" --valid "$DATA/multi30k/val" --vocab-size 1000 --d-model 128 \
      --ffn-dim 256 --heads 4 --encoder-layers 2 --decoder-layers 2 --max-tokens 2000 --max-steps 60 \
      --log-interval 10 --threads 2 --device cpu --out "$run" 2>/dev/null
    end=$(date +%s.%N)
    tps=$(python3 -c "import json, statistics, sys; r = [json.loads(l) for l in open(sys.argv[1])]; \
print(round(statistics.median(x['tokens_per_s'] for x in r if 'tokens_per_s' in x)))" "$run/metrics.jsonl")
    echo "round $round $bin wall $(echo "$end - $start" | bc) tok/s $tps"
  done
done
