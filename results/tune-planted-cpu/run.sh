#!/bin/bash
# Repeated tunings of the planted approach (tests/planted_framework.py), paired by turns and unpaired, alternating:
# OUT=/tmp/planted-rates N=3 results/tune-planted-cpu/run.sh, then python results/tune-planted-cpu/rates.py $OUT.
cd "$(dirname "$0")/../.."
export PYTHONPATH=$PWD DTBENCH_PLUGINS=tests.planted_framework
OUT=${OUT:-/tmp/planted-rates}
mkdir -p "$OUT"
for i in $(seq 1 "${N:-3}"); do
  for p in turns none; do
    rm -rf "$OUT/$p-$i"
    .venv/bin/python -m bench tune --variants numpy-planted --devices 1 --task quick --window-steps 150 \
      --steps-per-epoch 760 --epochs 1 --budget 4 --repeats 1 --pairing $p --out "$OUT/$p-$i" > "$OUT/$p-$i.log" 2>&1
  done
done
