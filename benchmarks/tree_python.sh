#!/bin/sh
# This environment's interpreter with the current directory's tree first on the path: benchmarks/history_real.py
# starts each side of a duet in its own worktree, whose bench must be the one that runs.
PYTHONPATH="$PWD" exec "${DTBENCH_PYTHON:-python3}" "$@"
