"""The harness imports no framework: each variant runs in processes of its own."""
import pkgutil
import subprocess
import sys

import bench
from helpers import REPO

FRAMEWORKS = ("torch", "tensorflow", "keras", "accelerate", "jax")


def harness_modules() -> list[str]:
    """Every module of the bench package (its engines included), found, not listed by hand."""
    return [m.name for m in pkgutil.walk_packages(bench.__path__, "bench.") if m.name != "bench.__main__"]


def imported_after(modules: list[str], watched: tuple[str, ...]) -> list[str]:
    code = (f"import {', '.join(modules)}, sys; "
            f"print(sorted(m for m in {watched!r} if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return eval(result.stdout)


def test_every_harness_module_is_found():
    modules = harness_modules()
    assert len(modules) >= 30
    for expected in ("bench.cli", "bench.run.launch", "bench.worker.clock", "bench.report.report",
                     "bench.regress.compare", "bench.engines.dask", "bench.results.frame"):
        assert expected in modules


def test_harness_imports_neither_torch_nor_tensorflow():
    assert imported_after(harness_modules(), FRAMEWORKS) == []


def test_worker_api_is_standard_library_only():
    assert imported_after(["bench.worker"], ("numpy", "pandas", "scipy", *FRAMEWORKS)) == []
