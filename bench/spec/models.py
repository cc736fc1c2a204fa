"""The model a task trains, by name: a built-in one (both frameworks build it layer for layer), a model of the
libraries users already have, or the user's own builder. Standard library only: the harness and the ranks read it.

- `small-cnn`, `mnist-cnn`, `databricks-cnn`, `resnet50`: built by torch_impl/model.py and tf_impl/model.py alike.
- a model both frameworks' libraries have, named once (`efficientnet_b0`, `convnext_tiny`, ... PAIRED): timm's
  build for PyTorch's approaches, keras.applications' for TensorFlow's. Whether the two are the same model is
  measured per run (parameters, counted FLOPs) before the verdict ranks one against the other
  (bench.analysis.verdict, PAIR_TOLERANCE).
- `timm:NAME` (any `timm.create_model` name) and `torchvision:NAME` (`torchvision.models.get_model`): PyTorch's.
- `keras:NAME` (any `keras.applications` constructor, e.g. `keras:EfficientNetB0`): TensorFlow's.
- `module:PKG.MODULE:FUNCTION` (`--model-module`): `FUNCTION(channels=, classes=, image_size=)` returns a
  `torch.nn.Module` or a Keras model; its framework is what it returns.

Every model is built with random weights: nothing is downloaded.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Callable

from bench import command
from bench.spec import frameworks

BUILT_IN = ("small-cnn", "mnist-cnn", "databricks-cnn", "resnet50")
# Named once for both frameworks: each library's name of it (timm's, keras.applications' constructor), the library
# a framework builds it with being its record's paired_library.
PAIRED = {name: {"timm": timm, "keras": keras} for name, (timm, keras) in {
    **{f"efficientnet_b{i}": (f"efficientnet_b{i}", f"EfficientNetB{i}") for i in range(8)},
    "mobilenetv2_100": ("mobilenetv2_100", "MobileNetV2"), "convnext_tiny": ("convnext_tiny", "ConvNeXtTiny"),
    "densenet121": ("densenet121", "DenseNet121"), "resnet101": ("resnet101", "ResNet101"),
    "resnet152": ("resnet152", "ResNet152")}.items()}
# How far the two frameworks' builds of one name may differ in parameters and in counted FLOPs per sample and
# still be ranked as the same model. Keras' ResNet-50 (v1: strides on the 1x1 convolutions) has timm's (v1.5)
# parameters and 5.7 % fewer FLOPs: not ranked against it.
PAIR_TOLERANCE = 0.05
OWN = "module"
# timm names that fetch a config or weights from a hub before building anything.
REMOTE_PREFIXES = ("hf-hub:", "hf_hub:", "local-dir:")


class ModelNameError(ValueError):
    """A model name that cannot be built here: the message is one line naming the fix."""


@dataclass(frozen=True)
class ModelName:
    source: str   # "built-in", "paired", a framework's model library (timm, keras, ...), or "module"
    name: str     # the built-in's, the library's own name, or PKG.MODULE:FUNCTION

    @property
    def framework(self) -> str | None:
        """The family that builds it, or None (both: built-in, or not known before the module is imported)."""
        found = frameworks.of_library(self.source)
        return found.name if found else None

    @property
    def builtin(self) -> bool:
        return self.source == "built-in"


    def library_name(self, framework: str) -> str:
        """The name its library knows it by: for a name both have, the framework's own (timm's, keras')."""
        return PAIRED[self.name][frameworks.get(framework).paired_library] if self.source == "paired" else self.name

    @property
    def library(self) -> bool:
        """Built by a model library (timm, torchvision, Keras), either framework's or both."""
        return self.framework is not None or self.source == "paired"


def parse(model: str) -> ModelName:
    if model in BUILT_IN:
        return ModelName("built-in", model)
    if model in PAIRED:
        return ModelName("paired", model)
    source, _, name = model.partition(":")
    if source == OWN:
        module, _, function = name.rpartition(":")
        if not module or not function.isidentifier():
            raise ModelNameError(f"--model-module {name!r}: give PKG.MODULE:FUNCTION, e.g. mymodels.vit:build")
        return ModelName(OWN, name)
    if frameworks.of_library(source) is None or not name:
        raise ModelNameError(f"unknown model {model!r}: choose one of {', '.join(BUILT_IN)}, a model both frameworks "
                             f"build (`{command()} list`), a library's model as {_library_forms()} "
                             "(e.g. timm:resnet18), or --model-module")
    if name.startswith(REMOTE_PREFIXES):
        raise ModelNameError(f"{model}: fetches its config or weights from a hub; dtbench downloads nothing: name "
                             f"the architecture alone (e.g. timm:vit_tiny_patch16_224)")
    return ModelName(source, name)


def _library_forms() -> str:
    forms = [f"{library}:NAME" for f in frameworks.registry().values() for library in f.model_libraries]
    return ", ".join(forms[:-1]) + f" or {forms[-1]}" if len(forms) > 1 else forms[0]


def refusal(model: str, framework: str | None, variant) -> str | None:
    """Why `variant` cannot train `model` (of `framework`; None: either), or None."""
    trains = variant.family
    has = frameworks.get(trains).built_in_models
    if model in BUILT_IN and has is not None and model not in has:
        return f"{variant.name} builds the built-in {', '.join(has)} only, not {model} (--model {has[0]})"
    if framework in (None, trains):
        return None
    named = f"--model-module {model.partition(':')[2]}" if model.startswith(f"{OWN}:") else model
    return f"{named} is a {framework_name(framework)} model and {variant.name} trains {framework_name(trains)}'s"


def framework_name(framework: str | None) -> str:
    return frameworks.title(framework)


def builder(target: str) -> Callable:
    """`--model-module PKG.MODULE:FUNCTION`: the user's function, imported (in a rank, or the request's check)."""
    module, _, function = target.rpartition(":")
    try:
        return getattr(importlib.import_module(module), function)
    except (ImportError, AttributeError) as exc:
        raise ModelNameError(f"--model-module {target}: {exc} (the module must be importable from the repository "
                             "or your PYTHONPATH)") from None


def check_build(build: Callable, count: Callable, argv: list[str]) -> int:
    """`python -m torch_impl.model TASK_JSON` (or tf_impl's): build the task's model once, the request's check
    before anything starts, and print its parameter count or the one-line reason it cannot be built."""
    import json

    try:
        model = build(json.loads(argv[0]))  # the task's fields: the caller makes its TaskSpec
    except ModelNameError as exc:
        print(json.dumps({"error": str(exc)}))
        return 2
    print(json.dumps({"parameters": count(model)}))
    return 0


def main(argv: list[str]) -> int:
    """`python -m bench.spec.models PKG.MODULE:FUNCTION CHANNELS CLASSES SIDE`: build the user's model once and
    print its framework (read from what it returned; this process imports no framework of its own)."""
    import json

    target, channels, classes, side = argv[0], *map(int, argv[1:4])
    try:
        made = builder(target)(channels=channels, classes=classes, image_size=side)
    except ModelNameError as exc:
        print(json.dumps({"error": str(exc)}))
        return 2
    except Exception as exc:  # the user's code: its own error, on one line
        print(json.dumps({"error": f"--model-module {target} failed: {type(exc).__name__}: {exc}".splitlines()[0]}))
        return 2
    modules = [cls.__module__ for cls in type(made).__mro__]
    framework = frameworks.of_model_type(modules)
    if framework is None:
        print(json.dumps({"error": f"--model-module {target} returned a {type(made).__name__}: return a "
                                   "torch.nn.Module or a Keras model"}))
        return 2
    print(json.dumps({"framework": framework.name}))
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(main(sys.argv[1:]))
