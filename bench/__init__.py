"""dtbench's harness: what to run (spec), one run (run) on its hosts (hosts) or an engine's (engines), many runs
(sweep), inside each process (worker), the rows (results), reading them (analysis), comparing revisions (regress);
docs/architecture.md draws which may import which.

It knows no framework: no module here imports torch or tensorflow at top level; each variant runs
in processes of its own (torch_impl, tf_impl, accelerate_impl) and reports through `bench.worker`.
"""
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent


def command() -> str:
    """How the user started dtbench, for hints that name a command: `dtbench` where the installed command runs,
    else `python -m bench` (the two take the same commands, and the one the user typed works where they stand)."""
    return "dtbench" if Path(sys.argv[0]).name == "dtbench" else "python -m bench"
