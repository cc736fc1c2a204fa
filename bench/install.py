"""What dtbench is as an installed distribution: its version, and the command that installs an optional extra,
named so that it works from where the user stands (a pip install of its requirements, with the versions dtbench
pins; from a checkout without an installed dtbench, the checkout's own extra)."""
from __future__ import annotations

import re
from importlib import metadata

from bench import REPO_ROOT


def version() -> str:
    """The installed dtbench's version, or the checkout's pyproject.toml's (run from a checkout as it is)."""
    try:
        return metadata.version("dtbench")
    except metadata.PackageNotFoundError:
        found = re.search(r'^version = "([^"]+)"', (REPO_ROOT / "pyproject.toml").read_text(), re.M)
        return found.group(1) if found else "unknown"


def hint(extra: str) -> str:
    """`pip install ...` for the extra's requirements as dtbench pins them."""
    try:
        requires = metadata.requires("dtbench") or []
    except metadata.PackageNotFoundError:
        return f"pip install -e '{REPO_ROOT}[{extra}]'"
    marker = re.compile(rf"""extra\s*==\s*["']{re.escape(extra)}["']""")
    wanted = [r.split(";")[0].strip() for r in requires if marker.search(r.split(";", 1)[-1])]
    return "pip install " + " ".join(f"'{r}'" for r in wanted) if wanted else f"pip install -e '{REPO_ROOT}[{extra}]'"
