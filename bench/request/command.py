"""One command's request: what its command line gave (or defaulted), read once into a frozen value, and checked
once: each of its settings layers by its own `check`, then what only two layers together can get wrong."""
from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass
from types import MappingProxyType
from typing import Mapping, TypeVar

from bench.request.layout import dataclass_layers
from bench.spec.task import SpecError

Layer = TypeVar("Layer")
NOT_SETTINGS = ("command", "func")  # what argparse's namespace holds beside the settings


def read(cls: type[Layer], values: Mapping[str, object]) -> Layer:
    """A settings layer from a request's values: a field the command does not take keeps its default."""
    return cls(**{f.name: values[f.name] for f in dataclasses.fields(cls) if f.name in values})


@dataclass(frozen=True)
class Request:
    """Every setting of one command by its field's name (`request.devices`), or a whole layer typed
    (`request.layer(Plan)`). Frozen: one model of a sweep's --models, one approach of a tune, is a `replace`."""
    command: str
    values: Mapping[str, object]

    @classmethod
    def parsed(cls, args: argparse.Namespace) -> Request:
        return cls(args.command, MappingProxyType({k: v for k, v in vars(args).items() if k not in NOT_SETTINGS}))

    def __getattr__(self, name: str):
        if name.startswith("__") or name == "values":  # copying and pickling look before the fields exist
            raise AttributeError(name)
        try:
            return self.values[name]
        except KeyError:
            raise AttributeError(f"bench {self.command} takes no {name}") from None

    def replace(self, **changes) -> Request:
        return Request(self.command, MappingProxyType({**self.values, **changes}))

    def layer(self, cls: type[Layer]) -> Layer:
        return read(cls, self.values)

    def check(self) -> Request:
        """Every layer's refusals, then those across layers; the request itself where nothing is wrong."""
        for cls in dataclass_layers(self.command):
            self.layer(cls).check(self.command)
        given = self.values
        if given.get("models") and (given.get("model") or given.get("model_module")):
            raise SpecError("--models names every model of the sweep: drop --model / --model-module")
        if given.get("model") and given.get("model_module"):
            raise SpecError("--model and --model-module each name the model: give one")
        if given.get("assume_gpus") is not None and given.get("device_type") == "cpu":
            raise SpecError("--assume-gpus plans GPU runs: drop --device-type cpu (or --assume-gpus)")
        return self
