"""The frameworks dtbench trains with, one record each, declared by the framework's own package
(`torch_impl/framework.py`, `tf_impl/framework.py`): the harness asks the record what it needs to know (the
interpreter, the extra that installs it, the model check, the fast-path environment, the plain loop it is held to, the
collectives its probe prices, its plot panels) and never branches on a framework's name. Standard library only: a
rank reads it too (bench.spec.models, through the task).

A framework of one's own joins by a module that declares `FRAMEWORK` (and its `VARIANTS`), named in
DTBENCH_PLUGINS (comma-separated modules) in the environment of the harness and of its ranks."""
from __future__ import annotations

import functools
import importlib
import importlib.util
import os
import subprocess
import sys
from dataclasses import dataclass

from bench import REPO_ROOT

# The packages whose `framework` module declares a built-in framework, in the order tables and reports list them.
PACKAGES = ("torch_impl", "tf_impl", "jax_impl")
PLUGINS_ENV = "DTBENCH_PLUGINS"


@dataclass(frozen=True)
class Framework:
    name: str                # what Variant.family holds: "torch", "tensorflow"
    title: str               # how the report names it: "PyTorch"
    package: str             # the module its ranks import: not importable, its variants are refused up front
    extra: str               # the extra of dtbench's distribution that installs it: pip install 'dtbench[EXTRA]'
    model_check: str         # `python -m MODULE TASK_JSON` builds a task's model once (bench.run.model_check)
    panels: tuple[str, ...]  # its plot panels: the framework's own approaches, then its wrappers' (if any)
    model_libraries: tuple[str, ...] = ()  # `LIBRARY:NAME` models it trains: timm, torchvision; keras
    built_in_models: tuple[str, ...] | None = None  # the built-in models (bench.spec.models.BUILT_IN) it has; None: all
    not_offered: tuple[str, ...] = ()  # approaches users weigh that it has no variant for, and why (`bench list`)
    # The library whose names bench.spec.models.PAIRED gives its build of a model both frameworks have.
    paired_library: str | None = None
    builds_from: str = ""    # the pair table's words for where its build comes from: "timm's or dtbench's"
    model_types: tuple[str, ...] = ()  # module prefixes of a user's model class that make it this framework's
    plain_loop: tuple[str, str] | None = None  # bench overhead: (its harness variant, the probes/ plain loop)
    fast_path_environment: str | None = None   # "module:function"(device_type) -> variables set before import
    input_phases: bool = False  # its loops feed the clock's resident windows (bench.worker.clock): --input-phases
    kernel_summary: str | None = None  # "module:function"(kernels, switches) -> the report header's parts
    probed_collectives: tuple[str, ...] = ()  # rows' frameworks whose all-reduce the collectives probe prices
    compile_problem: str | None = None  # "module:function"() -> why --compile cannot run here, or None
    gpu_problem: str | None = None      # "module:function"(variant name, CUDA_VISIBLE_DEVICES list) -> or None
    venv: str | None = None  # a venv of its own beside the checkout (a GPU box's TensorFlow: .venv-tf)
    python_env: str | None = None  # the variable that names an interpreter of the user's for it
    distributions: tuple[str, ...] = ()  # whose versions a row records (those installed), beyond its wrappers'
    former_names: tuple[str, ...] = ()  # distributions its rows once recorded as their framework (tensorflow-cpu)

    def python(self) -> str:
        """The interpreter of its processes: the variable's, else its own venv's where setup made one, else the
        harness's own."""
        if self.python_env and os.environ.get(self.python_env):
            return os.environ[self.python_env]
        venv = REPO_ROOT / self.venv / "bin" / "python" if self.venv else None
        return str(venv) if venv and venv.exists() else sys.executable

    def installed(self) -> bool:
        """Whether its interpreter can import it (looked up, not imported: the harness imports no framework)."""
        return importable(self.python(), self.package)

    def panel(self, distribution: str) -> str:
        """The panel of a row whose variant records `distribution`: its own approaches', or its wrappers'."""
        return self.panels[0] if distribution == self.name else self.panels[-1]


def install_hint(extra: str) -> str:
    """What installs an extra of dtbench's distribution, as a refusal names it."""
    return f"pip install 'dtbench[{extra}]'"


@functools.cache
def importable(python: str, package: str) -> bool:
    """Whether `python` finds `package`, asked once a process for each interpreter."""
    if python == sys.executable:
        return importlib.util.find_spec(package) is not None
    probe = f"import importlib.util, sys; sys.exit(importlib.util.find_spec({package!r}) is None)"
    try:
        return subprocess.run([python, "-c", probe], capture_output=True, timeout=60).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def package_modules() -> list[str]:
    """The built-in frameworks' record modules."""
    return [f"{p}.framework" for p in PACKAGES]


def plugin_modules() -> list[str]:
    return [m.strip() for m in os.environ.get(PLUGINS_ENV, "").split(",") if m.strip()]


@functools.cache
def registry() -> dict[str, Framework]:
    """Every framework, by name: the built-in packages' in their order, then the plug-ins'."""
    declared = [importlib.import_module(m).FRAMEWORK for m in package_modules()]
    declared += [importlib.import_module(m).FRAMEWORK for m in plugin_modules()]
    return {f.name: f for f in declared}


def get(name: str) -> Framework:
    return registry()[name]


def names() -> tuple[str, ...]:
    return tuple(registry())


def of_library(library: str) -> Framework | None:
    """The framework whose models `LIBRARY:NAME` names (None: no framework's library)."""
    return next((f for f in registry().values() if library in f.model_libraries), None)


def of_model_type(modules: list[str]) -> Framework | None:
    """The framework of a user's model, from the modules of its class and its bases."""
    return next((f for f in registry().values() if any(m.startswith(f.model_types) for m in modules)), None)


def title(name: str | None) -> str:
    """The report's name of a framework ("PyTorch"); a name no record declares, as it is."""
    return registry()[name].title if name in registry() else str(name)


def load(path: str):
    """The object a "module:NAME" string names."""
    module, attribute = path.split(":")
    return getattr(importlib.import_module(module), attribute)
