"""constraints.txt, the lock: every dependency pinned within pyproject.toml's ranges, `make setup` installing within
it, and this environment (made by `make setup`) holding exactly its versions."""
import subprocess
import tomllib
from importlib import metadata

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from bench import REPO_ROOT

# TensorFlow's GPU build goes to a venv of its own (.venv-tf), outside the lock.
OWN_VENV = {"tf-gpu"}


def lock() -> dict[str, Version]:
    pins = {}
    for line in (REPO_ROOT / "constraints.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, version = line.split("==")
            pins[canonicalize_name(name)] = Version(version)
    return pins


def test_the_lock_pins_every_dependency_within_its_range():
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    wanted = list(project["dependencies"]) + [req for extra, reqs in project["optional-dependencies"].items()
                                              if extra not in OWN_VENV for req in reqs]
    pins = lock()
    for text in wanted:
        requirement = Requirement(text)
        name = canonicalize_name(requirement.name)
        assert name in pins, f"{requirement.name} is not in constraints.txt: `make lock` after `make setup`"
        assert requirement.specifier.contains(pins[name], prereleases=True), (text, str(pins[name]))


def test_make_setup_installs_within_the_lock_and_this_environment_holds_its_versions():
    planned = subprocess.run(["make", "-n", "-B", "packages"], cwd=REPO_ROOT, capture_output=True, text=True,
                             env={"PATH": "/usr/bin:/bin", "SETUP": "venv"}, check=True).stdout
    installs = [line for line in planned.replace("\\\n", " ").splitlines()
                if line.startswith(".venv/bin/python -m pip install ")]  # not .venv-tf's
    assert len(installs) == 1 and all("-c constraints.txt" in line for line in installs), installs
    installed = {canonicalize_name(d.metadata["Name"]): Version(d.version) for d in metadata.distributions()}
    differ = {name: (str(installed[name]), str(pin)) for name, pin in lock().items()
              if name in installed and installed[name] != pin and name != "dtbench"}
    assert not differ, f"installed and locked versions differ (installed, locked): {differ}"
