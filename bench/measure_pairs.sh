#!/bin/bash
# Two normlab binaries measuring curvature during training alternately, each a fresh process into a
# fresh folder: `--curvature-every 25` over 50 updates (measurements at 0, 25, 50; 32 sentences,
# 10 Lanczos steps, the defaults) and `--warmup auto` over 100 updates at lr 1e-2 (its ramp's
# measurements), on Multi30k val with the demo's model shape (Post-LN, d 64, 6+6 layers), fp32,
# 2 threads. What a change to the measurements is timed with (docs/performance.md, "Kept graphs
# for the measurements during training").
# Usage: bench/measure_pairs.sh BINARY_A BINARY_B [ROUNDS=3] [DATA=../shared/data] [OUT_DIR=/tmp/measure_pairs]
# Prints per round and binary: the curvature run's measurement seconds (curvature.jsonl), the auto
# run's (warmup.jsonl, summed) and both walls; then whether A's and B's records agree apart from
# their seconds (they should, bit for bit, when the change is one of speed only).
set -euo pipefail
if [ $# -lt 2 ]; then sed -n '2,11p' "$0" >&2; exit 2; fi
A=$1; B=$2; ROUNDS=${3:-3}; DATA=${4:-../shared/data}; OUT=${5:-/tmp/measure_pairs}
for f in "$A" "$B" "$DATA/multi30k/val.de.gz"; do [ -e "$f" ] || { echo "measure_pairs.sh: no such file: $f" >&2; exit 2; }; done
mkdir -p "$OUT"
common=(--train "$DATA/multi30k/val" --valid "$DATA/multi30k/val" --vocab-size 1000 --d-model 64 --ffn-dim 256
        --heads 4 --encoder-layers 6 --decoder-layers 6 --dropout 0.1 --optimizer adam --betas 0.9,0.98
        --max-tokens 2048 --seed 1 --scheme post-ln --precision fp32 --threads 2 --device cpu)
records() {  # a jsonl file's records without their timings, one per line
  python3 -c "
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    print(json.dumps({k: v for k, v in r.items() if k not in ('seconds', 'wall_s', 'tokens_per_s')}, sort_keys=True))" "$1"
}
for round in $(seq "$ROUNDS"); do
  for side in A B; do
    bin=${!side}
    curv="$OUT/curvature-$side-$round"; auto="$OUT/auto-$side-$round"
    rm -rf "$curv" "$auto"
    start=$(date +%s.%N)
    "$bin" train "${common[@]}" --lr 1e-3 --lr-schedule inverse-sqrt --warmup-init-lr 1e-7 --warmup-steps 1 \
      --max-steps 50 --curvature-every 25 --out "$curv" > /dev/null 2>&1
    mid=$(date +%s.%N)
    "$bin" train "${common[@]}" --lr 1e-2 --lr-schedule constant --warmup auto --max-steps 100 --out "$auto" \
      > /dev/null 2>&1
    end=$(date +%s.%N)
    python3 -c "
import json, sys
c = [json.loads(l)['seconds'] for l in open(sys.argv[1])]
w = [json.loads(l).get('seconds', 0.0) for l in open(sys.argv[2])]
print(f'round {sys.argv[3]} {sys.argv[4]}: curvature measurements', ' '.join(f'{s:.3f}' for s in c),
      f's (wall {float(sys.argv[5]):.1f} s); auto: {sum(w):.3f} s in {sum(1 for s in w if s)} measurements (wall {float(sys.argv[6]):.1f} s)')
" "$curv/curvature.jsonl" "$auto/warmup.jsonl" "$round" "$bin" "$(echo "$mid - $start" | bc)" "$(echo "$end - $mid" | bc)"
  done
done
same=yes
for f in curvature/curvature.jsonl auto/warmup.jsonl auto/metrics.jsonl curvature/metrics.jsonl; do
  run=${f%%/*}; file=${f#*/}
  cmp -s <(records "$OUT/$run-A-1/$file") <(records "$OUT/$run-B-1/$file") || same="no ($f differs)"
done
echo "records of A and B equal apart from their timings: $same"
