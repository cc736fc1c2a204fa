"""dtbench's harness: what to run (spec), running it (run), inside each process (worker), the rows
(results), reading them (analysis), comparing revisions (regress) and engines (engines).

It knows no framework: no module here imports torch or tensorflow at top level; each variant runs
in processes of its own (torch_impl, tf_impl, accelerate_impl) and reports through `bench.worker`.
"""
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
