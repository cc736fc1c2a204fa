"""Your model: a timm, torchvision or Keras model by name, or your own module, trained by every approach of its
framework at the task's (or --image-size / --channels') shape; a name that cannot be built here is refused in
one line before anything starts, and nothing is downloaded."""
import json
import os
import subprocess
import sys

import pytest

from bench.spec import models
from bench.spec.variants import VARIANTS, get_variant
from helpers import CPU, REPO, bench, cli, rows

TORCH_APPROACHES = [v.name for v in VARIANTS.values() if v.family == "torch" and v.in_default_sweep]


def test_a_model_name_says_which_library_and_framework_builds_it():
    assert models.parse("resnet50") == models.ModelName("built-in", "resnet50")
    assert models.parse("timm:vit_tiny_patch16_224").framework == "torch"
    assert models.parse("torchvision:resnet18").framework == "torch"
    assert models.parse("keras:EfficientNetB0").framework == "tensorflow"
    assert models.parse("module:examples.own_model:torch_mlp").framework is None  # what it returns decides
    assert models.parse("small-cnn").framework is None  # both frameworks build the built-in ones
    for bad, words in (("timm:", "unknown model"), ("onnx:resnet", "unknown model"),
                       ("module:examples.own_model", "give PKG.MODULE:FUNCTION"),
                       ("timm:hf-hub:timm/resnet18.a1_in1k", "downloads nothing")):
        with pytest.raises(models.ModelNameError, match=words):
            models.parse(bad)
    assert "tf-mirrored trains TensorFlow's" in models.refusal("timm:resnet18", "torch", get_variant("tf-mirrored"))
    assert models.refusal("small-cnn", None, get_variant("tf-mirrored")) is None


BUILDS = pytest.mark.slow  # refused once its framework has tried to build it (seconds); the others by name alone


@pytest.mark.parametrize("variant,args,words", [
    pytest.param("torch-ddp", ["--model", "timm:resnet_nope"], "timm:resnet_nope: timm", marks=BUILDS),
    pytest.param("tf-single", ["--model", "keras:ResNetNope"], "keras:ResNetNope: keras", marks=BUILDS),
    ("torch-ddp", ["--model", "timm:hf-hub:timm/resnet18.a1_in1k"], "downloads nothing"),
    ("tf-single", ["--model", "timm:resnet18"], "timm:resnet18 is a PyTorch model and tf-single trains TensorFlow's"),
    ("torch-ddp", ["--model", "keras:EfficientNetB0"], "is a TensorFlow model and torch-ddp trains PyTorch's"),
    pytest.param("tf-single", ["--model", "keras:EfficientNetB0"], "Input size must be at least 32x32", marks=BUILDS),
    # A name both libraries have is built by the framework of the approach asked for, too.
    pytest.param("tf-single", ["--model", "efficientnet_b0", "--channels", "3"], "Input size must be at least 32x32",
                 marks=BUILDS),
    pytest.param("torch-ddp", ["--model", "torchvision:resnet18"], "takes 3-channel images: add --channels 3",
                 marks=BUILDS),
    ("torch-ddp", ["--model-module", "examples.own_model:nope"], "--model-module examples.own_model:nope"),
    pytest.param("tf-single", ["--model-module", "examples.own_model:torch_mlp"], "is a PyTorch model and tf-single",
                 marks=BUILDS),
    ("torch-ddp", ["--model", "timm:resnet18", "--model-module", "examples.own_model:torch_mlp"], "give one"),
])
def test_a_model_that_cannot_be_built_here_is_one_line_and_exit_2(tmp_path, variant, args, words):
    done = bench("run", "--variant", variant, "--task", "quick", *args, "--out", str(tmp_path), env=CPU, timeout=300)
    assert done.returncode == 2, done.stderr[-2000:]
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("error: ") and words in line
    assert not (tmp_path / "runs").exists()  # refused before anything started


def test_the_model_check_dies_with_the_harness(tmp_path):
    """SIGKILL leaves the harness no time to stop its children: the build it started dies with it (the kernel's
    parent-death signal), not minutes later."""
    import signal
    import time

    import psutil

    harness = subprocess.Popen([sys.executable, "-m", "bench", "run", "--variant", "torch-ddp", "--task", "quick",
                                "--model", "timm:resnet18", "--channels", "3", "--out", str(tmp_path)],
                               cwd=REPO, env={**os.environ, **CPU}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while not (checks := [p for p in psutil.Process(harness.pid).children() if "torch_impl.model" in p.cmdline()]):
            assert harness.poll() is None and time.monotonic() < deadline, "the model check never started"
            time.sleep(0.05)
        harness.send_signal(signal.SIGKILL)
        harness.wait()
        gone, alive = psutil.wait_procs(checks, timeout=10)
        assert alive == [], [p.cmdline() for p in alive]
    finally:
        harness.kill()


COMMON = ("--task", "quick", "--epochs", "1", "--scaling", "strong", "--no-analysis", "--sample-every", "0",
          "--channels", "3")


def sweep(out, variants: str, *model: str) -> dict[tuple[str, int, str], dict]:
    """`variants` on 1 and 2 CPU slots (or --devices), the quick task's digits resized and made 3-channel on the
    device, one epoch (each sweep inside a test's time limit): the folder's rows by (variant, slots, model), each
    trained with exact accuracy."""
    done = bench("sweep", "--variants", variants, *model, *COMMON, "--max-devices", "2", "--out", str(out), env=CPU,
                 timeout=580)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    found = {}
    for row in rows(out):
        if row["status"] == "skipped":  # DataParallel on a CPU is the plain module: one slot
            assert (row["variant"], row["world_size"]) == ("torch-dp", 2), row["error"]
            continue
        assert row["status"] == "ok", (row["variant"], row["task"]["model"], row["error"])
        assert row["eval_samples"] == 397 and 0 <= row["test_accuracy"] <= 1  # every test image once, resized
        assert row["task"]["channels"] == 3 and row["flops_per_sample"] > 0
        found[(row["variant"], row["world_size"], row["task"]["model"])] = row
    return found


@pytest.mark.slow
def test_the_single_device_pytorch_approaches_train_a_timm_model(tmp_path):
    alone = sweep(tmp_path, "torch-single,torch-dp", "--image-size", "16", "--devices", "1", "--model",
                  "timm:resnet18")
    assert set(alone) == {("torch-single", 1, "timm:resnet18"), ("torch-dp", 1, "timm:resnet18")}


@pytest.mark.slow
def test_every_pytorch_approach_trains_a_timm_model(tmp_path):
    """The approaches that spread over devices, on 2 slots (the single-device ones: the test above), each on timm's
    own small ResNet for tests (0.37 M parameters: the code path of any timm model, at a fraction of ResNet-18's
    steps), answered under the model's name (a verdict per model, and the figure over models: test_model_size)."""
    spread = [v for v in TORCH_APPROACHES if get_variant(v).max_devices is None and v != "torch-dp"]
    trained = sweep(tmp_path, ",".join(spread), "--image-size", "16", "--zero-stage", "3",  # + parameters
                    "--devices", "2", "--models", "timm:test_resnet")
    assert set(trained) == {(v, 2, "timm:test_resnet") for v in spread}
    assert "2 CPU slots, quick task (timm:test_resnet at 16px 3ch)" in (tmp_path / "report.md").read_text()


@pytest.mark.slow
def test_fsdp_shards_a_transformers_own_blocks(tmp_path):
    trained = sweep(tmp_path, "torch-fsdp", "--image-size", "32", "--devices", "2", "--model",
                    "timm:vit_tiny_patch16_224")
    row = trained[("torch-fsdp", 2, "timm:vit_tiny_patch16_224")]
    held = row["memory"]["model_state_bytes"]
    # The whole model's parameters, counted by the request's own check of the same task (a run on one slot
    # holds them all): fp32, 4 bytes each.
    whole = 4 * built("torch", row["task"])["parameters"]
    # Each of the two ranks holds half the parameters: the ViT's twelve blocks sharded, not one rank holding all.
    assert held["0"]["parameters"] == pytest.approx(held["1"]["parameters"], rel=0.01)
    # Within 5 %: each sharded parameter is padded to divide by the ranks (2.8 % for this ViT).
    assert held["0"]["parameters"] == pytest.approx(whole / 2, rel=0.05)


def built(framework: str, task: dict) -> dict:
    """The request's model check of `task` (bench.run.model_check), run in a process of the framework: its answer."""
    done = subprocess.run([sys.executable, "-m", f"{framework}_impl.model", json.dumps(task)], cwd=REPO,
                          env={**os.environ, **CPU}, capture_output=True, text=True, check=True, timeout=300)
    return json.loads(done.stdout.strip().splitlines()[-1])


def run_on_two_slots(out, variant: str, *model: str) -> dict:
    """One run on 2 CPU slots (the 1-slot paths of every approach are the ResNet-18 sweep's)."""
    done = bench("run", "--variant", variant, "--devices", "2", *model, *COMMON[:4], "--channels", "3",
                 "--sample-every", "0", "--out", str(out), env=CPU, timeout=580)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    [row] = rows(out)
    assert row["status"] == "ok" and row["eval_samples"] == 397 and row["world_size"] == 2, row["error"]
    return row


@pytest.mark.slow
def test_tf_mirrored_trains_a_keras_application(tmp_path):
    row = run_on_two_slots(tmp_path, "tf-mirrored", "--image-size", "32", "--model", "keras:EfficientNetB0")
    assert row["environment"]["replicas"] == 2 and row["flops_per_sample"] > 0


@pytest.mark.slow
@pytest.mark.parametrize("variant,function", [("torch-ddp", "torch_mlp"), ("tf-mirrored", "keras_mlp")])
def test_your_own_module_is_trained_by_the_approaches_of_its_framework(tmp_path, variant, function):
    row = run_on_two_slots(tmp_path, variant, "--model-module", f"examples.own_model:{function}")
    assert row["task"]["model"] == f"module:examples.own_model:{function}" and row["variant"] == variant


def test_a_name_both_libraries_have_is_each_frameworks_own_build():
    name = models.parse("efficientnet_b2")
    assert (name.source, name.framework, name.library) == ("paired", None, True)
    assert models.refusal("efficientnet_b2", None, get_variant("tf-mirrored")) is None
    assert models.refusal("efficientnet_b2", None, get_variant("torch-fsdp")) is None
    assert models.PAIRED["efficientnet_b2"] == {"timm": "efficientnet_b2", "keras": "EfficientNetB2"}


def test_the_seeds_presets_carry_their_recipes_and_train_small_on_a_cpu():
    from bench.spec.task import CPU_IMAGE_SIZE, get_task

    effnet, resnet, databricks = (get_task(n) for n in ("efficientnet-b2", "resnet18", "databricks-mnist"))
    assert (effnet.model.name, effnet.recipe.optimizer, effnet.model.head_dropout, effnet.model.image_size) == (
        "efficientnet_b2", "adam", 0.5, 224)
    assert (resnet.model.name, resnet.recipe.optimizer, resnet.recipe.momentum) == ("torchvision:resnet18", "sgd", 0.9)
    assert (databricks.model.name, databricks.recipe.momentum, databricks.recipe.lr) == ("databricks-cnn", 0.5, 0.01)
    assert CPU_IMAGE_SIZE == {"efficientnet-b2": 32, "resnet18": 32}


@pytest.mark.parametrize("args,words", [
    (["--head-dropout", "0.5"], "--head-dropout goes with a library's model"),
    (["--model", "timm:resnet18", "--head-dropout", "1.5"], "--head-dropout 1.5 must be at least 0 and below 1"),
])
def test_a_head_dropout_the_model_cannot_take_is_one_line_and_exit_2(tmp_path, args, words):
    done = cli("run", "--variant", "torch-ddp", "--task", "quick", *args, "--out", str(tmp_path), env=CPU)
    assert done.returncode == 2 and done.stderr.strip().splitlines() == [f"error: {done.stderr.split('error: ')[1]}"
                                                                         .strip()]
    assert words in done.stderr


@pytest.mark.slow
@pytest.mark.parametrize("model,side,channels", [("efficientnet_b2", 32, 3), ("convnext_tiny", 32, 3),
                                                 ("databricks-cnn", 28, 1)])
def test_both_frameworks_build_a_name_they_share_to_the_same_parameter_count(model, side, channels):
    """Each framework's build, in a process of its own (timm and TensorFlow never share one)."""
    from bench.spec.task import get_task

    task = get_task("quick", model=model, image_size=side, channels=channels,
                    head_dropout=0.5 if model != "databricks-cnn" else 0.0).to_dict()
    counts = [built(framework, task) for framework in ("torch", "tf")]
    assert counts[0] == counts[1] and counts[0]["parameters"] > 20_000
