"""Bad input, generated (Hypothesis): random option combinations and values for `run`, `sweep`, `report`, `regress`
and `maxbatch`, and the files a user hands dtbench, torn or of the wrong shape. Every one ends in a one-line error
and exit 2, or reaches the point where it would start training (stopped there: nothing trains here); never a
traceback, never a changed row of an existing store.

In one process: the launch points are replaced by a stop, the model check by its answer (its own builds are
test_models'), the S3 check by nothing (nothing but loopback is addressed), so a generated example costs
milliseconds."""
from __future__ import annotations

import contextlib
import functools
import io
import json
import os
import shutil
import signal
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from bench import cli
from bench.interrupt import STOP_SIGNALS
from bench.results import ResultStore
from bench.analysis.folder import Folder
from test_report import row

EXAMPLES = int(os.environ.get("DTBENCH_GENERATED_EXAMPLES", "60"))  # a larger budget: set it, as the note records


class WouldTrain(Exception):
    """The command got as far as starting runs."""


def _stop(*args, **kwargs):
    raise WouldTrain


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    """A folder with rows a user would not want touched."""
    folder = tmp_path_factory.mktemp("store")
    for r in (row("torch-ddp", 1, 5000.0), row("torch-ddp", 2, 7000.0), row("tf-mirrored", 2, 9000.0)):
        ResultStore(folder).append(r)
    return folder


@pytest.fixture(scope="module")
def stopped():
    """Every launch point stops the command; what it checked before is what is tested."""
    from bench.regress import calibrate, duets
    from bench.run import execute
    from bench.sweep import runner
    from bench.run import model_check
    from bench.studies import audit, microbench
    from bench.worker import data

    patch = pytest.MonkeyPatch()
    for owner, name in ((runner, "run_all"), (execute, "execute"), (microbench, "peak_for_sweep"), (audit, "audit"),
                        (duets, "against"), (calibrate, "calibrate"), (microbench, "measure_peak")):
        patch.setattr(owner, name, _stop)
    patch.setattr(model_check, "_run", lambda framework, args: {"framework": "torch", "parameters": 1})
    patch.setattr(data, "check_remote", lambda task: None)
    yield
    patch.undo()


@functools.cache
def _options(command: str) -> list:
    parser = cli.build_parser()  # once a command: a generated example draws its options from them
    [commands] = [a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction"]
    return [a for a in commands.choices[command]._actions if a.option_strings and a.dest not in ("help", "out")]


WORDS = st.sampled_from(["", "0", "-1", "1", "2", "3", "8", "1e9", "nan", "inf", "-inf", "0.5", "abc", "torch-ddp",
                         "tf-mirrored,torch-fsdp", "quick", "default", "all", "timm:resnet18", "keras:ResNet50",
                         "s3://bucket/prefix", "memory,files", "1,2", "étoile", "💥", "a" * 300, "--", "x:y:z",
                         "torchrun,ray", "127.0.0.1", "sqlite:///x.db", "/nonexistent/dir", "resnet50,small-cnn"])


@st.composite
def command_lines(draw, command: str) -> list[str]:
    argv = [command]
    for action in draw(st.lists(st.sampled_from(_options(command)), max_size=6, unique_by=lambda a: a.dest)):
        flag = action.option_strings[-1]
        if action.nargs == 0:
            argv.append(flag)
            continue
        choices = [str(c) for c in action.choices] if action.choices else []
        value = draw(st.sampled_from(choices) | WORDS if choices else
                     WORDS | st.integers(-10, 10**7).map(str) | st.floats(allow_nan=True).map(repr) | st.text(max_size=8))
        argv += [flag, value]
    if command in ("run", "maxbatch") and "--variant" not in argv:
        argv += ["--variant", draw(st.sampled_from(["torch-ddp", "tf-mirrored", "deepspeed", "torch-dp"]))]
    return argv


def _outcome(argv: list[str]) -> tuple[str, str]:
    err = io.StringIO()
    handlers = {signum: signal.getsignal(signum) for signum in STOP_SIGNALS}  # main() installs its own
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            code = cli.main(argv)
        except WouldTrain:
            return "trains", err.getvalue()
        except SystemExit as exc:  # argparse's refusal: usage, then the error line
            code = exc.code
        finally:
            for signum, handler in handlers.items():
                signal.signal(signum, handler)
    return str(code), err.getvalue()


def _check(argv: list[str], store: Path, before: bytes) -> None:
    code, err = _outcome(argv)
    assert "Traceback" not in err, (argv, err)
    assert code in ("trains", "0", "2"), (argv, code, err)
    if code == "2":
        errors = [line for line in err.strip().splitlines() if "error:" in line]
        assert len(errors) == 1 and err.strip().splitlines()[-1] == errors[0], (argv, err)
    assert (store / "results.jsonl").read_bytes() == before, argv


@pytest.mark.parametrize("command", ["run", "sweep", "maxbatch", "regress"])
def test_generated_command_lines_end_in_one_error_line_or_a_start(command, store, stopped, tmp_path_factory):
    before = (store / "results.jsonl").read_bytes()

    @settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    @given(command_lines(command))
    def check(argv):
        out = tmp_path_factory.mktemp("out")
        # --out the store itself or a fresh folder: either way no row of the store may change.
        _check(argv + ["--out", str(store if len(argv) % 2 else out)], store, before)
        shutil.rmtree(out, ignore_errors=True)

    check()


TORN = st.sampled_from(["{", "{}", "[]", "null", "\"text\"", "{\"status\": 1}", "{\"variant\": null}", "\x00\x01",
                        "{\"task\": \"quick\", \"status\": \"ok\"}", "é" * 50, "1e999", "{\"nodes\": \"two\"}"])


@settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
@given(cut=st.integers(0, 4000), tail=TORN)
def test_a_torn_or_foreign_results_file_keeps_every_complete_row_and_judges_them(tmp_path_factory, cut, tail):
    """A store whose last line was cut anywhere, or that holds lines of another shape: every complete row is read,
    the rest skipped, and the verdict over them made (as `bench report` makes it, less the plots)."""
    from bench.analysis import verdict

    folder = tmp_path_factory.mktemp("torn")
    for r in (row("torch-ddp", 1, 5000.0), row("torch-ddp", 2, 7000.0)):
        ResultStore(folder).append(r)
    whole = (folder / "results.jsonl").read_bytes()
    prefix = whole[:len(whole) - min(cut, len(whole) - 1)]  # cut anywhere, as a kill during an append would
    torn = prefix + b"\n" + tail.encode() + b"\n"
    (folder / "results.jsonl").write_bytes(torn)
    kept = [json.loads(line)["run_id"] for line in prefix.split(b"\n") if _parses(line)]
    assert [r["run_id"] for r in ResultStore(folder).dicts()] == kept
    verdict.verdict_lines(Folder.read(folder))
    assert (folder / "results.jsonl").read_bytes() == torn  # read, never rewritten


def _parses(line: bytes) -> bool:
    try:
        return isinstance(json.loads(line), dict)
    except ValueError:
        return False


@pytest.mark.parametrize("content", [None, b"", b"{\n", b"{}\n", b"[1, 2]\n"])
def test_a_report_of_a_folder_without_rows_is_one_line_and_exit_2(tmp_path, content):
    if content is not None:
        (tmp_path / "results.jsonl").write_bytes(content)
    code, err = _outcome(["report", str(tmp_path)])
    assert code == "2" and "Traceback" not in err and err.strip().splitlines()[-1].startswith("error: "), err
    assert "holds no rows" in err


JSON = st.recursive(st.none() | st.booleans() | st.integers(-3, 10**12) | st.floats(allow_nan=True) | WORDS,
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6) | WORDS, inner,
                                                                                max_size=3), max_leaves=8)
SPEC_KEYS = st.sampled_from(["variant", "world_size", "nodes", "device_type", "task", "run_id"])


@st.composite
def spec_files(draw) -> str:
    """What a --resume-from folder's spec.json may hold: torn text, another shape, or a spec with some fields wrong
    (the task as a tree, flat, or neither)."""
    quick = {"name": "quick", "model": "small-cnn", "image_size": 8, "channels": 1, "classes": 10,
             "global_batch": 64, "epochs": 3, "lr": 0.05, "dataset": "digits"}
    tree = {"name": "quick", "model": {"name": "small-cnn", "image_size": 8, "channels": 1, "classes": 10},
            "recipe": {"global_batch": 64, "epochs": 3, "lr": 0.05}, "data": {"dataset": "digits"}}
    spec = {"variant": "torch-ddp", "world_size": 1, "nodes": 1, "device_type": "cpu",
            "task": draw(st.sampled_from([quick, tree, {}, {"name": "quick"}]))}
    for key in draw(st.lists(SPEC_KEYS, max_size=3, unique=True)):
        spec[key] = draw(JSON)
    text = json.dumps(spec)
    return draw(st.sampled_from([text, text[:draw(st.integers(0, len(text)))], json.dumps(draw(JSON))]))


@settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
@given(content=spec_files())
def test_a_resume_from_folder_whatever_its_spec_holds_is_one_line_or_a_start(content, stopped, tmp_path_factory):
    """--resume-from names a run folder with a checkpoint; its spec.json is whatever a user, a newer or older dtbench
    or a torn write left there."""
    run_dir = tmp_path_factory.mktemp("resumed")
    (run_dir / "checkpoint").mkdir()
    (run_dir / "checkpoint" / "checkpoint.pt").write_bytes(b"x")
    (run_dir / "spec.json").write_text(content)
    out = tmp_path_factory.mktemp("out")
    code, err = _outcome(["run", "--variant", "torch-ddp", "--task", "quick", "--checkpoint-every-epoch",
                          "--resume-from", str(run_dir), "--out", str(out)])
    assert "Traceback" not in err and code in ("trains", "2"), (content, code, err)
    if code == "2":
        assert len(err.strip().splitlines()) == 1 and err.startswith("error: --resume-from "), (content, err)


IMAGE_BYTES = st.sampled_from([b"", b"\x89PNG\r\n\x1a\n", b"not an image", b"\xff\xd8\xff" + b"\x00" * 20]) | st.binary(
    max_size=64)


@settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
@given(layout=st.lists(st.tuples(st.sampled_from(["train", "test", "val", "", "train/a", "train/b", "test/a",
                                                  "train/a/deeper", "é", "train/💥"]),
                                 st.sampled_from(["x.png", "y.jpg", "z.txt", ".hidden", "n"]), IMAGE_BYTES),
                       max_size=6))
def test_an_image_folder_whatever_it_holds_is_one_line_or_a_start(layout, stopped, tmp_path_factory):
    """--dataset imagefolder --data-dir DIR: the folder a user points at, with any layout and any bytes in its files."""
    root = tmp_path_factory.mktemp("images")
    for folder, name, content in layout:
        (root / folder).mkdir(parents=True, exist_ok=True)
        (root / folder / name).write_bytes(content)
    out = tmp_path_factory.mktemp("out")
    code, err = _outcome(["run", "--variant", "torch-ddp", "--task", "quick", "--dataset", "imagefolder",
                          "--data-dir", str(root), "--out", str(out)])
    assert "Traceback" not in err and code in ("trains", "2"), (layout, code, err)
    if code == "2":
        assert len(err.strip().splitlines()) == 1 and err.startswith("error: "), (layout, err)


S3_OBJECTS = st.lists(st.tuples(st.sampled_from(["train/a/", "train/b/", "test/a/", "test/b/", "val/a/", "", "train/",
                                                 "a/", "train/a/deeper/", "train/é/"]),
                                st.sampled_from(["x.png", "y.jpg", "z", ".keep", "💥.png"]), IMAGE_BYTES),
                      min_size=1, max_size=6)


def test_an_s3_prefix_whatever_it_holds_is_one_line_or_readable(s3_server, monkeypatch):
    """--input s3 --data-url s3://BUCKET/PREFIX against the real S3-compatible server: a prefix of any keys and bytes
    is refused in one line before anything starts, or described as the image folder it is."""
    import boto3

    from bench.spec.task import SpecError, get_task
    from bench.worker import data

    for name, value in s3_server.env().items():
        monkeypatch.setenv(name, value)
    s3 = boto3.client("s3", endpoint_url=s3_server.endpoint, region_name="us-east-1",
                      aws_access_key_id=s3_server.key_id, aws_secret_access_key=s3_server.secret)
    s3.create_bucket(Bucket="generated")
    prefixes = iter(range(10**6))

    @settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    @given(objects=S3_OBJECTS)
    def check(objects):
        prefix = f"p{next(prefixes)}/"
        for folder, name, content in objects:
            s3.put_object(Bucket="generated", Key=prefix + folder + name, Body=content)
        task = get_task("quick", input="s3", data_url=f"s3://generated/{prefix}")
        try:
            data.check_remote(task)
        except SpecError as exc:
            assert "\n" not in str(exc) and str(exc), (objects, str(exc))

    check()


CHECKPOINT_CHANGES = st.lists(st.tuples(
    st.sampled_from(["truncate", "append", "flip", "delete", "add", "manifest", "none"]),
    st.sampled_from(["model.pt", "optimizer.pt", "sub/shard-0.bin", "MANIFEST.json"]), st.binary(max_size=16)),
    max_size=3)


@settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
@given(changes=CHECKPOINT_CHANGES)
def test_a_checkpoint_changed_after_its_save_is_refused_in_one_line_and_an_intact_one_starts(
        changes, stopped, tmp_path_factory):
    """--resume-from a run whose checkpoint was then truncated, extended, edited, thinned, added to, or whose
    manifest was: one line naming what changed and exit 2; left as saved, the run starts."""
    from bench.run.execute import write_spec
    from bench.run.runspec import RunSpec
    from bench.spec.devices import discover
    from bench.spec.task import get_task
    from bench.spec.variants import get_variant
    from bench.worker import manifest

    run_dir = tmp_path_factory.mktemp("saved")
    spec = RunSpec(get_variant("torch-ddp"), get_task("quick", checkpoint_every_epoch=True), "cpu", 1, 1)
    write_spec(spec, spec.check(discover()), "saved", run_dir, None)
    checkpoint = run_dir / "checkpoint"
    for name, size in (("model.pt", 300), ("optimizer.pt", 200), ("sub/shard-0.bin", 50)):
        (checkpoint / name).parent.mkdir(parents=True, exist_ok=True)
        (checkpoint / name).write_bytes(bytes(i % 251 for i in range(size)))
    manifest.write(checkpoint, 1)
    for change, name, content in changes:
        path = checkpoint / name
        if change == "truncate" and path.exists():
            path.write_bytes(path.read_bytes()[: len(path.read_bytes()) // 2])
        elif change == "append" and path.exists():
            path.write_bytes(path.read_bytes() + content)
        elif change == "flip" and path.exists() and path.stat().st_size:
            data = bytearray(path.read_bytes())
            data[len(data) // 3] ^= 0xFF
            path.write_bytes(bytes(data))
        elif change == "delete":
            path.unlink(missing_ok=True)
        elif change == "add":
            (checkpoint / f"extra-{name.replace('/', '-')}").write_bytes(content)
        elif change == "manifest":
            (checkpoint / manifest.NAME).write_bytes(content)
    out = tmp_path_factory.mktemp("out")
    code, err = _outcome(["run", "--variant", "torch-ddp", "--task", "quick", "--checkpoint-every-epoch",
                          "--resume-from", str(run_dir), "--out", str(out)])
    assert "Traceback" not in err and code in ("trains", "2"), (changes, code, err)
    damaged = manifest.damage(checkpoint)
    if damaged or not (checkpoint / manifest.NAME).exists() and not any(checkpoint.rglob("*.pt")):
        assert code == "2" and len(err.strip().splitlines()) == 1, (changes, err)
        assert err.startswith(f"error: --resume-from {run_dir}: "), (changes, err)
    else:
        assert code == "trains", (changes, err)
