"""dtbench installed as other Python tools are, not run from its checkout: its own version in the row, its cache
in the user's cache directory (never site-packages), no commit of whatever repository it sits in."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import CPU, REPO


def test_the_cache_is_the_checkouts_own_or_the_users_never_beside_an_installed_package(tmp_path, monkeypatch):
    from bench.worker import data

    monkeypatch.delenv("DTBENCH_CACHE", raising=False)
    assert data.cache_root() == REPO / ".cache" / "dtbench"  # a checkout: its own
    monkeypatch.setattr(data, "REPO_ROOT", tmp_path / "site-packages")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert data.cache_root() == tmp_path / "xdg" / "dtbench"
    monkeypatch.setenv("DTBENCH_CACHE", str(tmp_path / "mine"))
    assert data.cache_root() == tmp_path / "mine"


def test_the_commit_is_dtbenchs_own_never_that_of_a_repository_it_is_installed_in(tmp_path):
    from bench.run.environment import git_sha

    assert git_sha(REPO) and len(git_sha(REPO).removesuffix("-dirty")) == 40
    project = tmp_path / "project"
    installed = project / ".venv" / "lib" / "site-packages"
    installed.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    subprocess.run(["git", "-C", str(project), "-c", "user.email=a@b", "-c", "user.name=a", "commit", "-q",
                    "--allow-empty", "-m", "theirs"], check=True)
    assert git_sha(installed) is None and git_sha(project)


@pytest.mark.slow
def test_an_installed_dtbench_runs_outside_its_checkout(tmp_path):
    """A non-editable install (pip's own build of the project, without its dependencies: this environment has
    them), run from another folder by the `dtbench` entry point's function."""
    site = tmp_path / "site-packages"
    built = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                            "--target", str(site), str(REPO)], capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr[-2000:]
    assert (site / "bench" / "cli.py").exists() and not (site / "pyproject.toml").exists()
    [dist_info] = site.glob("dtbench-*.dist-info")
    assert "License-Expression: Apache-2.0" in (dist_info / "METADATA").read_text()
    assert (dist_info / "licenses" / "LICENSE").read_text().split()[:4] == ["Apache", "License", "Version", "2.0,"]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {**os.environ, **CPU, "PYTHONPATH": str(site), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    env.pop("DTBENCH_CACHE", None)
    done = subprocess.run([sys.executable, "-c", "import sys; from bench.cli import main; sys.exit(main())", "run",
                           "--variant", "torch-ddp", "--devices", "2", "--task", "quick", "--out", "out"],
                          cwd=elsewhere, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    [row] = [json.loads(line) for line in (elsewhere / "out" / "results.jsonl").read_text().splitlines()]
    assert row["status"] == "ok" and row["environment"]["dtbench"][0].isdigit() and row["git_sha"] is None
    assert (tmp_path / "cache" / "dtbench").is_dir() and not (site / ".cache").exists()
