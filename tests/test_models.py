"""Your model: a timm, torchvision or Keras model by name, or your own module, trained by every approach of its
framework at the task's (or --image-size / --channels') shape; a name that cannot be built here is refused in
one line before anything starts, and nothing is downloaded."""
import pytest

from bench.spec import models
from bench.spec.variants import VARIANTS, get_variant
from helpers import CPU, bench, rows

TORCH_APPROACHES = [v.name for v in VARIANTS.values() if not v.framework.startswith("tensorflow")
                    and v.in_default_sweep]


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


COMMON = ("--task", "quick", "--epochs", "1", "--scaling", "strong", "--max-devices", "2", "--no-analysis",
          "--sample-every", "0", "--channels", "3")


def sweep(out, variants: str, *model: str) -> dict[tuple[str, int], dict]:
    """`variants` on 1 and 2 CPU slots, the quick task's digits resized and made 3-channel on the device, one epoch
    (each sweep inside a test's time limit): its rows by (variant, slots), each trained with exact accuracy."""
    done = bench("sweep", "--variants", variants, *model, *COMMON, "--out", str(out), env=CPU, timeout=580)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    found = {}
    for row in rows(out):
        if row["status"] == "skipped":  # DataParallel on a CPU is the plain module: one slot
            assert (row["variant"], row["world_size"]) == ("torch-dp", 2), row["error"]
            continue
        assert row["status"] == "ok", (row["variant"], row["task"]["model"], row["error"])
        assert row["eval_samples"] == 397 and 0 <= row["test_accuracy"] <= 1  # every test image once, resized
        assert row["task"]["channels"] == 3 and row["flops_per_sample"] > 0
        found[(row["variant"], row["world_size"])] = row
    return found


@pytest.mark.slow
def test_every_pytorch_approach_trains_a_timm_model(tmp_path):
    trained = sweep(tmp_path, ",".join(TORCH_APPROACHES), "--image-size", "16", "--zero-stage", "3",  # + parameters
                    "--model", "timm:resnet18")
    assert set(trained) == {(v, n) for v in TORCH_APPROACHES for n in (1, 2)
                            if get_variant(v).max_devices is None or n == 1} - {("torch-dp", 2)}
    assert {r["task"]["model"] for r in trained.values()} == {"timm:resnet18"}


@pytest.mark.slow
def test_fsdp_shards_a_transformers_own_blocks(tmp_path):
    trained = sweep(tmp_path, "torch-fsdp", "--image-size", "32", "--model", "timm:vit_tiny_patch16_224")
    alone, held = (trained[("torch-fsdp", n)]["memory"]["model_state_bytes"] for n in (1, 2))
    # Each of the two ranks holds half the parameters: the ViT's twelve blocks sharded, not one rank holding all.
    assert held["0"]["parameters"] == pytest.approx(held["1"]["parameters"], rel=0.01)
    # Within 5 %: each sharded parameter is padded to divide by the ranks (2.8 % for this ViT).
    assert held["0"]["parameters"] == pytest.approx(alone["0"]["parameters"] / 2, rel=0.05)


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
