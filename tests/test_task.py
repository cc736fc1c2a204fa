import dataclasses
import json

import pytest

from bench.spec.task import PRESETS, SpecError, TaskSpec, get_task


def test_presets_are_valid_and_cover_the_issue():
    assert {"quick", "default", "mnist-cnn", "resnet50"} <= set(PRESETS)
    for task in PRESETS.values():
        task.validate()


def test_default_task_is_fashion_mnist_with_a_target():
    task = get_task("default")
    assert task.data.dataset == "fashion-mnist" and task.timing.target_accuracy == 0.85 and task.recipe.precision == "fp32"


def test_resnet50_is_synthetic_throughput_only():
    task = get_task("resnet50")
    assert task.synthetic and task.model.image_size == 224 and task.model.classes == 1000


def test_overrides_apply_and_none_keeps_the_preset():
    task = get_task("quick", global_batch=96, precision=None)
    assert task.recipe.global_batch == 96 and task.recipe.precision == PRESETS["quick"].recipe.precision


def test_spec_round_trips_through_a_dict():
    task = get_task("default")
    assert TaskSpec.from_dict(task.to_dict()) == task  # a stored row's (flat) task makes the same spec again
    assert TaskSpec.from_dict(json.loads(json.dumps(dataclasses.asdict(task)))) == task  # spec.json's tree too
    assert task.replace(global_batch=7, zero_stage=2).to_dict() == {**task.to_dict(), "global_batch": 7,
                                                                   "zero_stage": 2}
    with pytest.raises(TypeError, match="batch_sise"):
        task.replace(batch_sise=3)


@pytest.mark.parametrize("name,overrides,message", [
    ("nope", {}, "unknown task 'nope'"),
    ("quick", {"precision": "fp8"}, "unknown precision 'fp8'"),
    ("quick", {"global_batch": 0}, "global_batch must be at least 1"),
    ("quick", {"warmup_steps": 0}, "warmup_steps must be at least 1"),
])
def test_bad_specs_say_what_to_fix(name, overrides, message):
    with pytest.raises(SpecError, match=message):
        get_task(name, **overrides)


def test_imagefolder_needs_a_directory():
    with pytest.raises(SpecError, match="--data-dir"):
        PRESETS["quick"].replace(dataset="imagefolder").validate()


def test_each_task_flag_is_declared_once_on_its_field_and_reaches_the_task():
    import inspect

    from bench import cli, request
    from bench.spec import task as spec

    declared = spec.settings()
    hand_declared = {o for layer in (cli.layers.TaskChoice, cli.layers.Placement) for s in cli.settings_of(layer)
                     for o in s.options}
    for s in declared:
        assert not set(s.options) & hand_declared, f"{s.options} is declared on its field and again in a layer"
    # One per setting, and no option twice (argparse would refuse it before this)
    assert len({o for s in declared for o in s.options}) == len(declared) >= 25
    args = cli.build_parser().parse_args(
        ["run", "--variant", "torch-single", "--task", "quick", "--epochs", "4", "--loss-every", "5",
         "--device-memory", "2.5", "--schedule", "cosine", "--checkpoint-every-epoch", "--val-split", "0.2",
         "--dataset", "imagefolder", "--data-dir", "/tmp"])
    assert (args.epochs, args.loss_every_steps, args.device_memory_gib, args.schedule) == (4, 5, 2.5, "cosine")
    assert args.checkpoint_every_epoch and args.val_split == 0.2 and args.data_dir == "/tmp" and args.lr is None
    args = cli.build_parser().parse_args(
        ["run", "--variant", "torch-single", "--task", "quick", "--epochs", "4", "--loss-every", "5",
         "--device-memory", "2.5", "--schedule", "cosine", "--checkpoint-every-epoch"])
    task = request.task_from(args, "cpu")
    assert (task.recipe.epochs, task.timing.loss_every_steps, task.options.device_memory_gib) == (4, 5, 2.5)
    assert task.recipe.schedule == "cosine" and task.options.checkpoint_every_epoch
    # A flag not given keeps the preset's setting
    assert task.recipe.lr == PRESETS["quick"].recipe.lr and task.recipe.global_batch == PRESETS["quick"].recipe.global_batch
    with pytest.raises(SystemExit):  # a choice the field does not take: argparse's usage error, exit 2
        cli.build_parser().parse_args(["run", "--variant", "torch-single", "--schedule", "linear"])
