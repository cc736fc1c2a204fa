"""bench overhead: each framework's harness run against a plain loop of that framework, interleaved A/B."""
import json

import pytest

from helpers import CPU, bench


@pytest.mark.slow
def test_overhead_compares_each_frameworks_harness_with_its_plain_loop(tmp_path):
    done = bench("overhead", "--task", "quick", "--repeats", "2", "--out", str(tmp_path), env=CPU, timeout=500)
    assert done.returncode == 0, done.stderr[-2000:]
    summary = json.loads((tmp_path / "overhead.json").read_text())
    assert set(summary) == {"torch", "tensorflow"}
    assert summary["tensorflow"]["harness"] == "tf-single" and summary["torch"]["harness"] == "torch-ddp"
    for framework in summary.values():
        assert len(framework["pairs"]) == 2 and all(h > 0 and p > 0 for h, p in framework["pairs"])
        assert framework["ratios"] == [h / p for h, p in framework["pairs"]]
    assert "tensorflow: harness tf-single / plain loop throughput ratio" in done.stdout
