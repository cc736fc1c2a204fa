"""A hung run's stacks, asked for before the kill: every process under the run's launchers that registered
for STACKS_SIGNAL (bench.worker.stacks: the ranks and the children they fork) writes its threads' Python
stacks into the run's stacks/ folder, and the run's error names the frame each one's main thread was in."""
from __future__ import annotations

import os
import re
import socket
import time
from pathlib import Path

import psutil

from bench import REPO_ROOT
from bench.worker.stacks import REGISTRY, STACKS_DIR, STACKS_SIGNAL

SETTLE_S = 5.0  # the most it waits for the asked to finish writing: a loaded machine's scheduler is slow
_FRAME = re.compile(r'^\s*File "(?P<path>[^"]+)", line (?P<line>\d+) in (?P<function>\S+)')


def ask(roots: list[int], run_dir: Path) -> int:
    """Signal every process under `roots` that registered its stacks file (bench.worker.stacks), and wait until
    each file is written; how many were asked."""
    registered = _registered(run_dir)
    asked: list[Path] = []
    for root in roots:
        try:
            tree = [root, *(child.pid for child in psutil.Process(root).children(recursive=True))]
        except psutil.NoSuchProcess:
            continue
        for pid in tree:
            # Registered, and still catching it: a pid reused by another process, or a child that exec'd
            # since it registered, would be killed by the signal's default action.
            if pid in registered and _catches(pid, STACKS_SIGNAL):
                try:
                    os.kill(pid, STACKS_SIGNAL)
                    asked.append(run_dir / STACKS_DIR / f"{registered[pid]}.txt")
                except ProcessLookupError:
                    pass
    _wait_written(asked)
    return len(asked)


def _registered(run_dir: Path) -> dict[int, str]:
    """pid -> the name of its stacks file: this host's processes (a run folder on a shared file system holds
    other hosts' too), the last registration of each pid."""
    try:
        lines = (run_dir / STACKS_DIR / REGISTRY).read_text().splitlines()
    except OSError:
        return {}
    here = socket.gethostname()
    return {int(pid): name for pid, host, name in (line.split(" ", 2) for line in lines if line.count(" ") >= 2)
            if pid.isdigit() and host == here}


def _catches(pid: int, signum: int) -> bool:
    """Whether the process handles the signal (its SigCgt mask in /proc)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    mask = next((int(line.split()[1], 16) for line in status.splitlines() if line.startswith("SigCgt:")), 0)
    return bool(mask >> (signum - 1) & 1)


def _wait_written(paths: list[Path]) -> None:
    """Until every file holds a stack and stopped growing (faulthandler writes it in one go), or SETTLE_S."""
    deadline, sizes = time.monotonic() + SETTLE_S, None
    while paths and time.monotonic() < deadline:
        time.sleep(0.2)
        now = [p.stat().st_size if p.exists() else 0 for p in paths]
        if all(now) and now == sizes:
            return
        sizes = now


def where_they_waited(run_dir: Path) -> list[str]:
    """"rank1: in barrier (torch/distributed/distributed_c10d.py:6371), from torch_impl/train.py:77 sync", one
    per stacks file written: the main thread's innermost frame, and the innermost of this project's own."""
    lines = []
    for path in sorted((run_dir / STACKS_DIR).glob("*.txt")):
        frames = _main_thread(path.read_text(errors="replace"))
        if frames:
            inner, own = frames[0], next((f for f in frames if _own(f["path"])), None)
            line = f"{path.stem}: in {inner['function']} ({_short(inner['path'])}:{inner['line']})"
            if own and own is not inner:
                line += f", from {_short(own['path'])}:{own['line']} {own['function']}"
            lines.append(line)
    return lines


def remove_unused(run_dir: Path) -> None:
    """Every process opens its stacks file at start: keep only those written to."""
    folder = run_dir / STACKS_DIR
    (folder / REGISTRY).unlink(missing_ok=True)
    for path in folder.glob("*.txt"):
        if path.stat().st_size == 0:
            path.unlink()
    if folder.is_dir() and not any(folder.iterdir()):
        folder.rmdir()


def _main_thread(text: str) -> list[dict]:
    """The frames (innermost first) of the thread that runs the program: the one whose outermost frame is a
    module's top level."""
    threads = [[m.groupdict() for m in map(_FRAME.match, block.splitlines()) if m]
               for block in re.split(r"^(?:Current thread|Thread) 0x", text, flags=re.M)[1:]]
    threads = [t for t in threads if t]
    return next((t for t in threads if t[-1]["function"] in ("<module>", "_run_module_as_main")),
                threads[0] if threads else [])


def _own(path: str) -> bool:
    return path.startswith(str(REPO_ROOT)) and "site-packages" not in path


def _short(path: str) -> str:
    """A path as a reader finds it: relative to the repo, or from the package folder on."""
    if _own(path):
        return os.path.relpath(path, REPO_ROOT)
    return path.split("site-packages/", 1)[-1] if "site-packages/" in path else os.path.basename(path)
