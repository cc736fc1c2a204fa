"""Each approach's own knobs (bench.spec.knobs, declared in its package): set by `bench run --set`, part of the run
key, refused in one line when unknown, and seen to reach the framework: the bucket size on the DDP object, the
DeepSpeed config file, TensorFlow's communication options."""
import json
import subprocess
import sys

import pytest

from bench.results.key import config_key
from bench.run.runspec import RunSpec
from bench.spec import knobs
from bench.spec.task import SpecError, get_task
from bench.spec.variants import VARIANTS, get_variant
from helpers import CPU, REPO, cli


def test_settings_are_one_canonical_text_and_read_back_typed_with_the_defaults_filled_in():
    ddp = knobs.declared(get_variant("torch-ddp").knobs)
    text = knobs.canonical(ddp, ["static_graph=True", "bucket_cap_mb=100"], "torch-ddp")
    assert text == "bucket_cap_mb=100.0 static_graph=true"  # sorted by name, each value as its knob writes it
    assert knobs.values(ddp, text) == {"bucket_cap_mb": 100.0, "gradient_as_bucket_view": True, "static_graph": True,
                                       "comm_hook": "none", "channels_last": False}
    assert knobs.chosen(ddp, text) == {"bucket_cap_mb": 100.0, "static_graph": True}
    assert knobs.values(ddp, "") == {k.name: k.default for k in ddp}


@pytest.mark.parametrize("variant,sets,words", [
    ("torch-ddp", ["bucket=5"], "torch-ddp has no knob 'bucket': its knobs are bucket_cap_mb, gradient_as_bucket_view"),
    ("torch-ddp", ["bucket_cap_mb=big"], "--set bucket_cap_mb=big"),
    ("torch-ddp", ["comm_hook=int8"], "'int8' is not one of none, bf16_compress, fp16_compress"),
    ("torch-ddp-static", ["static_graph=false"], "torch-ddp-static has no knob 'static_graph'"),
    ("torch-single", ["bucket_cap_mb=5"], "torch-single has no knob 'bucket_cap_mb': its knobs are none"),
    ("deepspeed", ["overlap_comm"], "give name=value"),
])
def test_an_unknown_knob_or_value_is_one_line_naming_the_knobs(variant, sets, words):
    with pytest.raises(SpecError) as refused:
        knobs.canonical(knobs.declared(get_variant(variant).knobs), sets, variant)
    assert words in str(refused.value) and "\n" not in str(refused.value)


def test_bench_run_refuses_an_unknown_knob_in_one_line_with_exit_2(tmp_path):
    result = cli("run", "--variant", "torch-ddp", "--devices", "2", "--task", "quick", "--set", "buckets=5",
                 "--out", str(tmp_path), env=CPU)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1].endswith("its knobs are bucket_cap_mb, gradient_as_bucket_view, "
                                                           "static_graph, comm_hook, channels_last, batch_scale, "
                                                           "compile, loader_workers")
    assert not (tmp_path / "results.jsonl").exists()


def test_a_setting_that_does_not_fit_the_task_is_refused_by_bench_run_and_never_raced(tmp_path):
    """Keras calls back once an execution: steps_per_execution must divide the warm-up and the windows."""
    result = cli("run", "--variant", "tf-multiworker-fit", "--devices", "2", "--task", "quick",
                 "--set", "steps_per_execution=4", "--out", str(tmp_path), env=CPU)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1].endswith(
        "--set steps_per_execution=4: it must divide --warmup-steps 2")
    from bench.sweep import tune
    spec = RunSpec(get_variant("tf-multiworker-fit"), get_task("quick", steps_per_epoch=20).for_world(2), "cpu", 1, 2)
    assert tune.candidates(spec)[0] == "" and tune.candidates(spec)[-1] == "steps_per_execution=2"
    assert not [c for c in tune.candidates(spec) if c.startswith("steps_per_execution=4")]  # 4 divides no warm-up of 2
    odd = RunSpec(get_variant("tf-multiworker-fit"), get_task("quick").for_world(2), "cpu", 1, 2)  # 21-step epochs
    assert not [c for c in tune.candidates(odd) if "steps_per_execution" in c]


def test_a_setting_is_part_of_the_run_key_and_the_series_name():
    default = {"variant": "torch-ddp", "device_type": "cpu", "nodes": 1, "devices_per_node": 2,
               "task": get_task("quick").to_dict()}
    tuned = {**default, "task": get_task("quick", knobs="bucket_cap_mb=5.0").to_dict()}
    assert config_key(tuned) != config_key(default)
    assert config_key(tuned).series == "torch-ddp (bucket_cap_mb=5.0)" and config_key(default).series == "torch-ddp"


def test_every_declared_knob_has_a_default_its_own_parse_takes_and_values_worth_trying():
    for variant in VARIANTS.values():
        for knob in knobs.declared(variant.knobs):
            assert knob.tries and knob.default not in knob.tries, knob.name
            for value in knob.tries:
                assert knob.parse(knob.text(value)) == value, (knob.name, value)


def test_zero_knobs_reach_the_deepspeed_config_file_and_unset_ones_leave_it_as_it_was():
    from deepspeed_impl.launch import deepspeed_config

    def zero(stage, text=""):
        task = get_task("quick", zero_stage=stage, knobs=text)
        return deepspeed_config(RunSpec(get_variant("deepspeed"), task, "cpu", 1, 2))["zero_optimization"]

    assert zero(2) == {"stage": 2, "reduce_bucket_size": 25 * 2**20 // 4}
    text = knobs.canonical(knobs.declared(get_variant("deepspeed").knobs),
                           ["reduce_bucket_size=5e5", "overlap_comm=true", "allgather_bucket_size=5e6"], "deepspeed")
    assert zero(2, text) == {"stage": 2, "reduce_bucket_size": 500_000, "overlap_comm": True,
                             "allgather_bucket_size": 5_000_000}
    assert zero(3, "stage3_param_persistence_threshold=100000") == {
        "stage": 3, "reduce_bucket_size": 25 * 2**20 // 4, "stage3_param_persistence_threshold": 100_000}


def test_ddp_knobs_reach_the_ddp_object(tmp_path):
    import torch
    import torch.distributed as dist
    from torch import nn

    from torch_impl import ddp
    from torch_impl.knobs import DDP

    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:
        cpu = torch.device("cpu")
        shipped = ddp.wrap(nn.Linear(4, 2), cpu, knobs.values(DDP, ""), static_graph=False)
        assert shipped.bucket_bytes_cap == 25 * 2**20 and shipped.gradient_as_bucket_view and not shipped.static_graph
        assert shipped._get_ddp_logging_data().get("comm_hook") in (None, "")
        text = "bucket_cap_mb=5.0 comm_hook=bf16_compress gradient_as_bucket_view=false static_graph=true"
        tuned = ddp.wrap(nn.Linear(4, 2), cpu, knobs.values(DDP, text), static_graph=False)
        assert tuned.bucket_bytes_cap == 5 * 2**20 and not tuned.gradient_as_bucket_view and tuned.static_graph
        assert tuned._get_ddp_logging_data()["comm_hook"] == "bf16_compress_hook"
        assert ddp.wrap(nn.Linear(4, 2), cpu, knobs.values(DDP, ""), static_graph=True).static_graph  # -static
    finally:
        dist.destroy_process_group()


def test_fsdp_knobs_reach_fully_shard(tmp_path):
    import torch
    import torch.distributed as dist
    from torch import nn
    from torch.distributed.fsdp import FSDPModule

    from torch_impl import fsdp
    from torch_impl.knobs import FSDP

    def sharded(text: str) -> list[nn.Module]:
        model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
        fsdp.shard(model, torch.device("cpu"), 1, "fp32", knobs.values(FSDP, text))
        return [m for m in model.modules() if isinstance(m, FSDPModule)]

    def resharded(module) -> bool:
        return module._get_fsdp_state()._fsdp_param_group.post_forward_mesh_info is not None

    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:
        root, *blocks = sharded("")
        assert len(blocks) == 2 and all(resharded(b) for b in blocks)  # each Linear a unit, freed after its forward
        _, *kept = sharded("reshard_after_forward=false")
        assert len(kept) == 2 and not any(resharded(b) for b in kept)
        assert len(sharded("shard_unit=model")) == 1  # the root alone: the whole model gathered at once
    finally:
        dist.destroy_process_group()


def printed_by(probe: str):
    """What a Python one-liner run in a process of its own printed last, as JSON: TensorFlow never enters pytest's,
    nor an Accelerator's process-wide state."""
    result = subprocess.run([sys.executable, "-c", probe], cwd=REPO, env=CPU, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_multiworker_knobs_reach_tensorflows_communication_options():
    probe = ("import json; from bench.spec import knobs; from tf_impl.knobs import MULTIWORKER; "
             "from tf_impl.strategies import communication_options as c; "
             "o = [c(d, knobs.values(MULTIWORKER, t)) for d, t in (('cpu', ''), ('cuda', ''), "
             "('cpu', 'bytes_per_pack=4194304 implementation=auto'))]; "
             "print(json.dumps([[x.implementation.name, x.bytes_per_pack] for x in o]))")
    assert printed_by(probe) == [["RING", 0], ["NCCL", 0], ["AUTO", 4194304]]


@pytest.mark.slow
def test_mirrored_knob_reaches_the_strategys_cross_device_ops():
    """Two logical CPU devices, as tf-mirrored makes them."""
    probe = ("import json, tensorflow as tf; from bench.spec import knobs; from tf_impl.knobs import MIRRORED; "
             "from tf_impl.strategies import cross_device_ops; "
             "cpu = tf.config.list_physical_devices('CPU')[0]; "
             "tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2); "
             "devices = [d.name for d in tf.config.list_logical_devices('CPU')]; "
             "made = [tf.distribute.MirroredStrategy(devices, cross_device_ops=cross_device_ops("
             "knobs.values(MIRRORED, t)['cross_device_ops'])) for t in ('', 'cross_device_ops=hierarchical_copy')]; "
             "print(json.dumps([type(s.extended._cross_device_ops).__name__ for s in made]))")
    assert printed_by(probe) == ["CollectiveAllReduce", "HierarchicalCopyAllReduce"]


@pytest.mark.slow
def test_accelerate_knobs_reach_the_ddp_kwargs_its_prepare_hands_ddp():
    probe = ("import json; from accelerate import Accelerator; from bench.spec import knobs; "
             "from accelerate_impl.knobs import DDP; from accelerate_impl.train import ddp_kwargs; "
             "out = [Accelerator(cpu=True, kwargs_handlers=[ddp_kwargs(knobs.values(DDP, t))]).ddp_handler for t in "
             "('', 'bucket_cap_mb=5 comm_hook=bf16 gradient_as_bucket_view=true static_graph=true')]; "
             "print(json.dumps([[h.to_kwargs(), h.comm_hook.value] if h else [{}, 'no'] for h in out]))")
    shipped, tuned = printed_by(probe)
    assert shipped == [{}, "no"]  # Accelerate's defaults: nothing handed over
    # what prepare() passes DDP(...), and the hook it registers on it
    assert tuned == [{"bucket_cap_mb": 5, "gradient_as_bucket_view": True, "static_graph": True}, "bf16"]


def test_lightning_knobs_reach_the_ddp_fabrics_strategy_makes(tmp_path):
    import torch
    import torch.distributed as dist
    from lightning_fabric.accelerators import CPUAccelerator
    from lightning_fabric.strategies import DDPStrategy
    from torch import nn

    from lightning_impl.knobs import STRATEGY

    def wrapped(text: str):
        settings = knobs.chosen(STRATEGY, text)  # as lightning_impl/train.py hands them to Fabric
        strategy = DDPStrategy(accelerator=CPUAccelerator(), parallel_devices=[torch.device("cpu")], **settings)
        return strategy.setup_module(nn.Linear(4, 2))

    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:
        shipped = wrapped("")
        assert shipped.bucket_bytes_cap == 25 * 2**20 and not shipped.gradient_as_bucket_view
        tuned = wrapped("bucket_cap_mb=5.0 channels_last=true gradient_as_bucket_view=true static_graph=true")
        assert tuned.bucket_bytes_cap == 5 * 2**20 and tuned.gradient_as_bucket_view and tuned.static_graph
    finally:
        dist.destroy_process_group()



def test_batch_scale_scales_the_recipes_batch_and_learning_rate_by_its_rule_and_the_key_knows_the_recipes():
    strong = get_task("default").for_world(2)
    doubled = strong.with_knobs("batch_scale=2.0")
    assert (doubled.recipe.global_batch, doubled.peak_lr) == (256, pytest.approx(2 * strong.peak_lr))
    assert doubled.for_world(2).recipe == doubled.recipe and doubled.with_knobs("").recipe == strong.recipe
    weak = get_task("default", scaling="weak", per_device_batch=32).for_world(2)
    halved = weak.with_knobs("batch_scale=0.5")
    assert (halved.recipe.per_device_batch, halved.recipe.global_batch, halved.recipe.lr_scale) == (16, 32, 1.0)
    assert halved.for_world(2).recipe == halved.recipe
    fixed = get_task("default", lr_scaling="none").for_world(2).with_knobs("batch_scale=2.0")
    assert (fixed.recipe.global_batch, fixed.peak_lr) == (256, get_task("default").peak_lr)  # --lr-scaling none
    where = {"variant": "torch-ddp", "device_type": "cpu", "nodes": 1, "devices_per_node": 2}
    key = config_key({**where, "task": doubled.to_dict()})
    assert key.global_batch == 256 and key.shipped == config_key({**where, "task": strong.to_dict()})


def test_a_batch_that_is_no_whole_batch_or_tune_batch_without_tune_is_one_line_and_exit_2(tmp_path):
    result = cli("run", "--variant", "torch-ddp", "--devices", "2", "--task", "quick", "--set", "batch_scale=0.3",
                 "--out", str(tmp_path), env=CPU)
    assert result.returncode == 2 and result.stderr.strip().splitlines()[-1].endswith(
        "--set batch_scale=0.3: the global batch 64 times 0.3 is not a whole number of samples")
    result = cli("sweep", "--tune-batch", "--out", str(tmp_path), env=CPU)
    assert result.returncode == 2 and "--tune-batch goes with --tune MINUTES" in result.stderr


def test_compile_and_loader_workers_knobs_set_their_task_options_and_the_key_knows_them_shipped():
    where = {"variant": "torch-ddp", "device_type": "cpu", "nodes": 1, "devices_per_node": 2}
    shipped = get_task("quick", input="files").for_world(2)
    tuned = shipped.with_knobs("compile=true loader_workers=2")
    assert (tuned.options.compile, tuned.data.loader_workers) == (True, 2)
    assert tuned.with_knobs("").options == shipped.options and tuned.with_knobs("").data == shipped.data
    key = config_key({**where, "task": tuned.to_dict()})
    assert (key.compile, key.loader_workers) == (True, 2)
    assert key.shipped == config_key({**where, "task": shipped.to_dict()})
    settable = knobs.settable(VARIANTS["torch-ddp"].knobs)
    assert knobs.misfit(settable, "loader_workers=2", get_task("quick")) == (  # memory input: no files to decode
        "--set loader_workers=2: --input memory reads no files: the loader workers decode files (--input files or s3)")
    assert knobs.misfit(settable, "compile=true", get_task("quick", compile=True)) == (
        "--set compile=true: the task sets --compile itself: drop it to tune it")


def test_compile_is_raced_only_with_tune_compile_and_where_the_approach_compiles_loader_workers_only_on_files():
    from bench.sweep import tune

    ddp = RunSpec(get_variant("torch-ddp"), get_task("quick").for_world(2), "cpu", 1, 2)
    assert not [c for c in tune.candidates(ddp) if c.startswith(("compile", "loader_workers"))]
    assert "compile=true" in tune.candidates(ddp, ("--tune-compile",))
    zero = RunSpec(get_variant("deepspeed"), get_task("quick", zero_stage=2).for_world(2), "cpu", 1, 2)
    assert "compile=true" not in tune.candidates(zero, ("--tune-compile",))  # deepspeed does not compile here
    files = RunSpec(get_variant("torch-ddp"), get_task("quick", input="files").for_world(2), "cpu", 1, 2)
    assert [c for c in tune.candidates(files) if c.startswith("loader_workers")] == ["loader_workers=1",
                                                                                     "loader_workers=2"]


def test_channels_last_reaches_every_pytorch_rank_through_the_audits_variable(monkeypatch):
    import torch

    from bench.run.launch import fast_path_environment
    from torch_impl import data

    for name in ("torch-ddp", "torch-ddp-static", "lightning", "accelerate"):
        assert "channels_last" in [k.name for k in knobs.declared(VARIANTS[name].knobs)]
    for name in ("torch-fsdp", "deepspeed"):  # their parameters must stay contiguous: the knob would reach nothing
        assert "channels_last" not in [k.name for k in knobs.declared(VARIANTS[name].knobs)]
    with pytest.raises(SpecError, match="tf-mirrored has no knob 'channels_last'"):
        knobs.canonical(knobs.settable(VARIANTS["tf-mirrored"].knobs), ["channels_last=true"], "tf-mirrored")
    spec = RunSpec(get_variant("torch-ddp"), get_task("quick", knobs="channels_last=true").for_world(2), "cpu", 1, 2)
    environment = fast_path_environment(spec)
    assert environment["DTBENCH_CHANNELS_LAST"] == "1"  # the CPU fast path leaves it off; the knob turns it on
    monkeypatch.setenv("DTBENCH_CHANNELS_LAST", environment["DTBENCH_CHANNELS_LAST"])
    assert data.memory_format(torch.device("cpu")) == torch.channels_last  # how the rank places model and input
    shipped = RunSpec(get_variant("torch-ddp"), get_task("quick").for_world(2), "cpu", 1, 2)
    assert "DTBENCH_CHANNELS_LAST" not in fast_path_environment(shipped) or \
        fast_path_environment(shipped)["DTBENCH_CHANNELS_LAST"] == "0"
