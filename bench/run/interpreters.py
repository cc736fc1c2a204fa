"""Which Python starts each framework's processes: its record's (bench.spec.frameworks.Framework.python), so that a
framework with a venv of its own (TensorFlow's GPU build on a GPU box, tf_impl/framework.py) is started there."""
from __future__ import annotations

import sys

from bench.spec import frameworks


def python_for(family: str | None) -> str:
    """The interpreter of a family's processes; None: of a process of no family yet (the user's model module, built
    to learn its family)."""
    return frameworks.get(family).python() if family else sys.executable
