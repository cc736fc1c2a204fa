"""Mixed precision: bf16 runs on CPU in every variant that supports it; fp16 on CPU is refused."""
import pytest

from helpers import CPU, bench, cli, rows


@pytest.mark.slow
@pytest.mark.parametrize("variant,devices", [("torch-ddp", 2), ("torch-dp", 1), ("accelerate", 2),
                                             ("tf-mirrored", 2), ("tf-multiworker", 2)])
def test_bf16_on_cpu(out, variant, devices):
    result = bench("run", "--variant", variant, "--devices", str(devices), "--task", "quick", "--precision", "bf16",
                   "--out", str(out), env=CPU)
    assert result.returncode == 0, result.stderr
    [row] = rows(out)
    assert row["status"] == "ok", row["error"]
    assert row["task"]["precision"] == "bf16" and row["test_accuracy"] > 0.3


@pytest.mark.parametrize("variant", ["torch-ddp", "accelerate", "tf-mirrored"])
def test_fp16_on_cpu_is_refused(out, variant):
    result = cli("run", "--variant", variant, "--task", "quick", "--precision", "fp16", "--device-type", "cpu",
                 "--out", str(out), env=CPU)
    assert result.returncode == 2 and "fp16 needs CUDA" in result.stderr
    assert rows(out) == []
