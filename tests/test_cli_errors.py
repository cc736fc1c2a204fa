"""Bad input: a one-line error naming the fix, exit code 2, and nothing written."""
import pytest

from helpers import bench, cli


@pytest.mark.parametrize("args,message", [
    (["run", "--variant", "torch-nope", "--task", "quick"], "unknown variant 'torch-nope'"),
    (["run", "--variant", "torch-ddp", "--task", "nope"], "unknown task 'nope'"),
    (["run", "--variant", "torch-ddp", "--task", "quick", "--devices", "0"], "at least 1"),
    (["run", "--variant", "torch-ddp", "--task", "quick", "--devices", "3"], "does not divide by world size 3"),
    (["run", "--variant", "torch-ddp", "--task", "quick", "--device-type", "cuda"], "GPUs but 0 are visible"),
    (["run", "--variant", "torch-ddp", "--task", "quick", "--precision", "fp16", "--device-type", "cpu"],
     "fp16 needs CUDA"),
    (["run", "--variant", "torch-dp", "--task", "quick", "--devices", "2", "--device-type", "cpu"],
     "runs at most 1 device slot"),
    (["sweep", "--task", "quick", "--max-devices", "3", "--nodes", "2"], "--max-devices 3 does not divide by --nodes 2"),
    (["sweep", "--task", "quick", "--variants", "torch-ddp,bogus"], "unknown variant 'bogus'"),
])
def test_bad_input_is_one_line_exit_2_and_writes_nothing(out, args, message):
    result = cli(*args, "--out", str(out), env={"CUDA_VISIBLE_DEVICES": ""})
    assert result.returncode == 2, result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and message in errors[0]
    assert not out.exists()


def test_list_shows_variants_tasks_knobs_and_devices_and_takes_v_after_the_command():
    result = cli("list", "-v")
    assert result.returncode == 0
    for word in ("torch-ddp", "torch-dp", "quick", "default", "mnist-cnn", "resnet50", "cores available",
                 "bucket_cap_mb", "reduce_bucket_size", "bytes_per_pack"):
        assert word in result.stdout


def test_the_version_is_the_distributions():
    from bench import install

    result = bench("--version")
    assert result.returncode == 0 and result.stdout.strip() == f"dtbench {install.version()}"
    assert install.version()[0].isdigit()
    # A missing extra's hint is a pip command with dtbench's own pins, which works wherever the user stands
    hint = install.hint("mlflow")
    assert hint.startswith("pip install ") and "'mlflow>=3.17'" in hint and "dtbench[" not in hint


@pytest.mark.parametrize("argv0, typed", [("/venv/bin/dtbench", "dtbench"), ("/repo/bench/__main__.py", "python -m bench")])
def test_a_hint_names_the_command_the_user_typed(monkeypatch, out, argv0, typed):
    """`dtbench` after an install (a pipx user has no `python` that imports bench), `python -m bench` from it."""
    monkeypatch.setattr("sys.argv", [argv0])
    result = cli("run", "--variant", "torch-nope", "--task", "quick", "--out", str(out))
    assert result.returncode == 2 and f"(see `{typed} list`)" in result.stderr
    assert cli("compare", "results/reference-cpu").stderr.count(f"{typed} compare ") == 2
