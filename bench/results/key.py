"""The run key: what "the same configuration" means everywhere (folding repeats, scaling baselines,
regression groups, report labels). Standard library only."""
from __future__ import annotations

from typing import NamedTuple

OWN_LAUNCHERS = ("local", "torchrun")  # engines that are the variant's own launcher: not named in labels


class RunKey(NamedTuple):
    variant: str
    engine: str            # local (the variant's own launcher only) | torchrun | ray | spark | dask
    device_type: str
    nodes: int
    devices_per_node: int
    task: str
    precision: str
    global_batch: int
    independent: bool      # gradient synchronisation off: the no-communication bound
    input: str = "memory"  # memory | synthetic (a real dataset's twin with the input pipeline left out)
    compile: bool = False  # torch.compile / XLA

    @property
    def world_size(self) -> int:
        return self.nodes * self.devices_per_node

    @property
    def series(self) -> str:
        """How tables and plots name the series: variant, (no sync), [engine] when not its own launcher."""
        engine = f" [{self.engine}]" if self.engine not in OWN_LAUNCHERS else ""
        modes = [m for m, on in (("compiled", self.compile), ("no sync", self.independent),
                                 (self.input, self.input != "memory")) if on]
        return self.variant + "".join(f" ({m})" for m in modes) + engine

    @property
    def label(self) -> str:
        return (f"{self.series} {self.nodes}x{self.devices_per_node} {self.device_type} "
                f"{self.task}/{self.precision} batch {self.global_batch}")

    def one_device(self, variant: str | None = None) -> "RunKey":
        """The scaling baseline: this configuration on one device with gradients synchronised; with
        `variant`, that variant's run instead (a plain single-device loop, which no engine runs)."""
        if variant is None:
            return self._replace(nodes=1, devices_per_node=1, independent=False)
        return self._replace(variant=variant, engine="local", nodes=1, devices_per_node=1, independent=False)


def config_key(row: dict) -> RunKey:
    """The key of a result row (as a dict: a stored line, or `ResultRow.to_dict()`)."""
    task = row["task"]
    return RunKey(row["variant"], row.get("engine") or "local", row["device_type"], int(row["nodes"]),
                  int(row["devices_per_node"]), task["name"], task.get("precision", "fp32"),
                  int(task.get("global_batch") or 0), bool(row.get("independent")),
                  task.get("input", "memory"), bool(task.get("compile")))


def scaling_efficiency(throughput_n: float, devices: int, throughput_1: float | None) -> float | None:
    """throughput(N) / (N x throughput(1))."""
    if not throughput_1 or devices < 1:
        return None
    return throughput_n / (devices * throughput_1)


def efficiencies(key: RunKey, throughput: float, one_device: dict[RunKey, float],
                 single_variant: str | None) -> tuple[float | None, float | None]:
    """The one rule for scaling efficiency: (vs the same configuration on one device, vs the
    framework's plain single-device loop), from the one-device throughputs by key. A no-sync run
    has none (it is the bound, not a result); a one-device run is not compared with itself."""
    if key.independent:
        return None, None
    own = None if key.world_size == 1 else scaling_efficiency(throughput, key.world_size,
                                                             one_device.get(key.one_device()))
    single = (scaling_efficiency(throughput, key.world_size, one_device.get(key.one_device(single_variant)))
              if single_variant else None)
    return own, single
