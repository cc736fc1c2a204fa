"""The harness imports no framework: each variant runs in processes of its own."""
import subprocess
import sys

from conftest import REPO

HARNESS = ["bench.cli", "bench.launch", "bench.sweep", "bench.results", "bench.report", "bench.data",
           "bench.devices", "bench.worker", "bench.overhead", "bench.stats"]


def test_harness_imports_neither_torch_nor_tensorflow():
    code = (f"import {', '.join(HARNESS)}, sys; "
            "print(sorted(m for m in ('torch', 'tensorflow', 'keras', 'accelerate') if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_worker_api_is_standard_library_only():
    code = "import bench.worker, sys; print('numpy' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True)
    assert result.stdout.strip() == "False"
