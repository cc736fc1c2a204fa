"""Your own function as a run like any other (`@dtbench.distributed`, `bench sweep --function`): a variant made
for it, its RunSpecs, and what its rank 0 returned.

The function and its arguments are pickled by value (cloudpickle, as Dask and Spark ship a function) into the
output folder; each rank loads them (torch_impl/function.py) inside the process group its engine made, and
`dtbench.step` feeds the run's clock. Launching, the timeout, the kill, the fold, the row and the store are the
built-in runs' own (bench.run.execute, bench.sweep.runner).
"""
from __future__ import annotations

import hashlib
import importlib
import inspect
import os
import pickle
import sys
from pathlib import Path
from typing import Callable

from bench.run.runspec import RunSpec
from bench.spec.models import OWN
from bench.spec.task import SpecError, get_task
from bench.spec.variants import Variant, check_engine

ENTRY = "torch_impl.function:rank"
FUNCTIONS = "functions"  # OUT/functions/: each call's pickled function and arguments


def load(target: str) -> Callable:
    """`--function MODULE:NAME`: the function, imported (a SpecError naming the fix where it is not there)."""
    module, _, name = target.rpartition(":")
    if not module or not name.isidentifier():
        raise SpecError(f"--function {target!r}: give MODULE:FUNCTION, e.g. examples.mlp_regression:train")
    if os.getcwd() not in sys.path:  # the `dtbench` script, unlike `python -m bench`, does not look here first
        sys.path.insert(0, os.getcwd())
    try:
        found = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:
        raise SpecError(f"--function {target}: {exc} (the module must be importable from here or your "
                        "PYTHONPATH)") from None
    return getattr(found, "__wrapped__", found)  # a function decorated with @dtbench.distributed: the plain one


def identity(fn: Callable) -> dict:
    """What the row records of the function: its module, name, file and its source's SHA-256 (the same code, the
    same hash, whatever the arguments)."""
    try:
        source, file = inspect.getsource(fn), inspect.getsourcefile(fn)
    except (OSError, TypeError):  # defined where no source is kept (an interactive prompt)
        source, file = None, None
    return {"module": fn.__module__, "name": fn.__qualname__, "file": file,
            "source_sha256": hashlib.sha256(source.encode()).hexdigest() if source is not None else None}


def write_payload(fn: Callable, args: tuple, kwargs: dict, out: Path) -> Path:
    """The function and its arguments pickled by value, once per distinct call, under OUT/functions/."""
    import cloudpickle

    # A module the ranks may not import (the user's script, a notebook's cell): its functions go by value.
    module = inspect.getmodule(fn)
    by_value = module is not None and module.__name__ != "__main__" and not _installed(module)
    if by_value:
        cloudpickle.register_pickle_by_value(module)
    try:
        payload = cloudpickle.dumps((fn, args, kwargs), protocol=pickle.HIGHEST_PROTOCOL)
    finally:
        if by_value:
            cloudpickle.unregister_pickle_by_value(module)
    path = out / FUNCTIONS / f"{fn.__name__}-{hashlib.sha256(payload).hexdigest()[:16]}.pkl"
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists():
        path.write_bytes(payload)
    return path


def _installed(module) -> bool:
    """An installed package's module, which every rank imports by name; any other (a script's, a notebook's
    helper beside it, the checkout's examples) goes by value, as its __main__ does: a rank's path may not hold it."""
    spec = getattr(module, "__spec__", None)
    return spec is not None and spec.origin is not None and "site-packages" in spec.origin


def variant(fn: Callable, payload: Path) -> Variant:
    """The function as a variant of its own: its name, PyTorch's process group, every engine."""
    return Variant(
        fn.__name__, "torch", "torch", "torch_impl.launch:FUNCTION", "torch_impl.function", single_process=False,
        spans_nodes=True, summary=f"your own function {fn.__module__}.{fn.__qualname__}", in_default_sweep=False,
        engine_entry=ENTRY, checkpoints=False, checkpoint_hint="your own function saves what it saves",
        compiles=False, reads_files=False, profiles=False,
        approach=(("engine_entry", ENTRY), ("payload", str(payload)), ("function", identity(fn))))


def task(fn: Callable, warmup_steps: int | None = None, window_steps: int | None = None, windows: int | None = None):
    """The task a function's row records: its own name as the model, the clock's timing (the task's unless given),
    no dataset of dtbench's (the function reads its own)."""
    timing = {k: v for k, v in (("warmup_steps", warmup_steps), ("window_steps", window_steps),
                                ("windows", windows)) if v is not None}
    return get_task("default").replace(name="function", model=f"{OWN}:{fn.__module__}:{fn.__qualname__}",
                                       dataset="synthetic", **timing)


def specs(fn: Callable, args: tuple, kwargs: dict, out: Path, engines: list[str], device_counts: list[int],
          nodes: int = 1, device_type: str = "cpu", timeout_s: float = 600.0,
          addresses: dict[str, str | None] | None = None, **timing) -> list[RunSpec]:
    """One RunSpec for each engine and device count, every one running `fn(*args, **kwargs)`; `addresses`: an
    engine's existing cluster (a Ray address, a Spark master, a Dask scheduler) in place of a local one."""
    for engine in engines:
        check_engine(engine)
    if nodes < 1 or any(d < 1 or d % nodes for d in device_counts):
        raise SpecError(f"devices {device_counts} must be positive multiples of nodes ({nodes})")
    made = variant(fn, write_payload(fn, args, kwargs, out))
    the_task = task(fn, **timing)
    return [RunSpec(made, the_task, device_type, nodes, devices // nodes, timeout_s=timeout_s, engine=engine,
                    engine_address=(addresses or {}).get(engine), sample_every_s=0.5)
            for devices in device_counts for engine in engines]


def values(out: Path, run_id: str) -> list:
    """Every rank's return value of a finished run, in rank order."""
    import cloudpickle  # noqa: F401  (the classes of values pickled by value)

    run_dir = out / "runs" / run_id  # each rank's value{RANK}.pkl (torch_impl/function.py)
    return [pickle.loads(path.read_bytes())
            for path in sorted(run_dir.glob("value*.pkl"), key=lambda p: int(p.stem[len("value"):]))]

