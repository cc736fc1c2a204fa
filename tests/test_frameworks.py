"""A framework is one record its package declares (bench.spec.frameworks): what the harness asks of it, a framework
that is not installed refused before anything starts, and a third framework joining with one record."""
import sys
from pathlib import Path

import pytest

from bench.spec import frameworks
from bench.spec.variants import VARIANTS, overhead_pairs, panel, panels, probed_collectives
from helpers import REPO, bench, cli, rows

# An interpreter with no TensorFlow: the one the venv was made from (the tests run in the venv, which has it).
WITHOUT_TENSORFLOW = str(Path(sys.base_prefix) / "bin" / "python3")
PLUGIN = {"DTBENCH_PLUGINS": "tests.numpy_framework"}


def test_every_variant_names_a_declared_framework_and_the_tables_come_from_the_records():
    assert frameworks.names() == ("torch", "tensorflow", "jax")
    assert {v.family for v in VARIANTS.values()} == set(frameworks.names())
    assert overhead_pairs() == {"torch": ("torch-single", "probes.plain_loop"),
                                "tensorflow": ("tf-single", "probes.plain_tf_loop"),
                                "jax": ("jax-single", "probes.plain_jax_loop")}
    assert panels() == ("PyTorch", "PyTorch wrappers", "TensorFlow", "JAX")
    assert [panel(f) for f in ("torch", "deepspeed", "tensorflow", "tensorflow-cpu")] == [
        "PyTorch", "PyTorch wrappers", "TensorFlow", "TensorFlow"]
    assert probed_collectives() == ("torch", "accelerate")
    for framework in frameworks.registry().values():  # every "module:function" a record names resolves
        for path in (framework.kernel_summary, framework.fast_path_environment, framework.compile_problem,
                     framework.gpu_problem):
            assert path is None or callable(frameworks.load(path)), path


def test_a_variant_whose_framework_is_not_installed_is_refused_before_anything_starts(out):
    """The rank used to find out: `failed: node0 exit code 1:` with nothing after the colon, minutes later."""
    assert not frameworks.importable(WITHOUT_TENSORFLOW, "tensorflow")
    result = bench("run", "--variant", "tf-single", "--devices", "1", "--task", "quick", "--out", str(out),
                   env={"DTBENCH_TF_PYTHON": WITHOUT_TENSORFLOW}, timeout=120)
    assert result.returncode == 2, result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, result.stderr
    assert "tf-single trains with TensorFlow, which is not installed here" in errors[0]
    assert errors[0].endswith("pip install 'dtbench[tf]'")
    assert not out.exists()


def test_a_sweep_naming_such_a_variant_is_refused_too_and_list_marks_it(out):
    result = cli("sweep", "--task", "quick", "--variants", "torch-single,tf-single", "--max-devices", "1",
                 "--out", str(out), env={"DTBENCH_TF_PYTHON": WITHOUT_TENSORFLOW})
    assert result.returncode == 2 and "pip install 'dtbench[tf]'" in result.stderr
    assert not out.exists()
    listed = cli("list", env={"DTBENCH_TF_PYTHON": WITHOUT_TENSORFLOW}).stdout.splitlines()
    marked = {line.split()[0] for line in listed if "[not installed: pip install 'dtbench[tf]']" in line}
    assert marked == {v.name for v in VARIANTS.values() if v.family == "tensorflow"}
    assert not any("not installed" in line for line in cli("list").stdout.splitlines())


@pytest.mark.slow
def test_a_third_framework_joins_with_one_record_and_trains_through_bench_run(out):
    """tests/numpy_framework.py declares NumPy's record and one variant; nothing of the harness names it."""
    listed = bench("list", env=PLUGIN)
    assert "numpy-single" in listed.stdout
    result = bench("run", "--variant", "numpy-single", "--devices", "1", "--task", "quick", "--out", str(out),
                   env=PLUGIN, timeout=300)
    assert result.returncode == 0, result.stderr
    [row] = rows(out)
    assert (row["status"], row["variant"], row["framework"]) == ("ok", "numpy-single", "numpy")
    assert row["eval_samples"] == 397 and row["test_accuracy"] > 0.5  # every test sample of the digits once
    assert row["throughput"]["median"] > 0
    harness = [p for p in (REPO / "bench").rglob("*.py") if "numpy_framework" in p.read_text()]
    assert harness == []
