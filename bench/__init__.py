"""dtbench's harness: what to run (spec), one run (run) on its hosts (hosts) or an engine's (engines), many runs
(sweep), inside each process (worker), the rows (results), reading them (analysis), comparing revisions (regress);
docs/architecture.md draws which may import which.

It knows no framework: no module here imports torch or tensorflow at top level; each variant runs
in processes of its own (torch_impl, tf_impl, accelerate_impl) and reports through `bench.worker`.
"""
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
