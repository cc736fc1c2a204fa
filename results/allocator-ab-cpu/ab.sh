#!/bin/bash
# Interleaved A/B: glibc's malloc as shipped vs dtbench's tuned one, same code, same session.
cd "$(dirname "$0")/../.."
for round in 1 2 3 4; do
  for cfg in "torch-single 1" "tf-single 1" "torch-ddp 2"; do
    set -- $cfg
    for mode in glibc tuned; do
      .venv/bin/python -m bench run --variant $1 --devices $2 --malloc $mode --out results/allocator-ab-cpu/$mode > /dev/null 2>&1
      echo "round $round $1 $2 $mode done $(date +%T)"
    done
  done
done
