"""The settings every option is declared with (bench.spec.setting), the layers a command composes
(bench.request.layout) and the frozen request a command gets (bench.request.command)."""
import dataclasses

import pytest

from bench import cli, request
from bench.request import layout, settings as layers
from bench.request.command import Request
from bench.spec.setting import declared
from bench.spec.task import SpecError


def test_every_command_a_setting_names_composes_its_layer():
    """A setting that names a command its layer is not in would be missing from that command's --help."""
    for layer in [cls for cls in vars(layers).values() if isinstance(cls, type) and issubclass(cls, layers.Settings)
                  and dataclasses.is_dataclass(cls)]:
        for s in declared(layer):
            for name in (*s.commands, *s.vary):
                assert name in layout.COMMANDS, f"{layer.__name__}.{s.dest} names {name!r}, no command"
                assert layer in layout.COMMANDS[name].layers, f"{layer.__name__}.{s.dest}: {name} lacks its layer"


def test_each_option_is_declared_once_a_command():
    parser = cli.build_parser()
    [sub] = [a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction"]
    for name, command in sub.choices.items():
        options = [o for a in command._actions for o in a.option_strings]
        assert len(options) == len(set(options)), name
    assert set(sub.choices) == set(layout.COMMANDS)


def test_the_request_is_frozen_and_a_variation_is_a_replace():
    args = cli.build_parser().parse_args(["sweep", "--models", "resnet18,small-cnn", "--malloc", "glibc"])
    given = Request.parsed(args)
    with pytest.raises(dataclasses.FrozenInstanceError):
        given.command = "run"
    with pytest.raises(TypeError):
        given.values["models"] = None
    one = given.replace(model="resnet18")
    assert (one.model, given.model, one.models) == ("resnet18", None, "resnet18,small-cnn")
    plan = given.layer(layers.Plan)
    assert isinstance(plan, layers.Plan) and plan.repeats == 1 and plan.device_counts is None
    assert request.run_settings(given)["malloc"] == "glibc" and "variant" not in request.run_settings(given)
    with pytest.raises(AttributeError, match="takes no budget"):
        given.budget  # noqa: B018 - tune's, not sweep's


def test_a_layer_refuses_what_is_wrong_with_it_alone_and_the_request_what_needs_two():
    check = layers.Plan(repeats=0).check
    with pytest.raises(SpecError, match="repeats must be at least 1"):
        check("sweep")
    check("report")  # a command that does not take them: nothing to refuse
    args = cli.build_parser().parse_args(["sweep", "--models", "resnet18", "--model", "small-cnn"])
    with pytest.raises(SpecError, match="--models names every model"):
        Request.parsed(args).check()
