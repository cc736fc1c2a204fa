"""--profile: the framework's profiler runs over windows that count in no throughput figure, writes a trace a
person can open, and cuts the profiled step into the same categories for every framework, adding up to it."""
from __future__ import annotations

import gzip
import json
import time

import pytest

from bench.worker import StepClock
from bench.worker.profile import CATEGORIES, PROFILED_WINDOWS, Span, partition, summary
from bench.run.launch import MALLOC_TUNED
from helpers import CPU, bench, cli, rows


class RecordingProfiler:
    def __init__(self):
        self.calls = []

    def start(self):
        self.calls.append("start")

    def mark(self):
        self.calls.append("mark")

    def stop(self, steps):
        time.sleep(0.2)  # writing a trace: outside every window and the training time
        self.calls.append(("stop", steps))


def test_the_profiled_windows_come_after_the_warm_up_and_before_the_timed_ones():
    profiler, warmed = RecordingProfiler(), []
    clock = StepClock(warmup=2, window_steps=3, windows=2, samples_per_step=1, sync=lambda: None,
                      on_warmup_done=lambda: warmed.append(list(profiler.calls)), profiler=profiler, profile_windows=2)
    clock.start()
    for _ in range(2 + 3 * (2 + 2)):
        clock.step_done()
    assert profiler.calls == ["start", "mark", ("stop", 6)]  # the marker opens after start's sync
    assert warmed == [["start", "mark", ("stop", 6)]]  # memory peaks reset after the profiler, before the timed windows
    assert len(clock.profiled_window_seconds) == 2 and len(clock.window_seconds) == 2 and clock.done
    assert all(s < 0.1 for s in clock.window_seconds) and clock.train_seconds() < 0.1


def test_the_profiled_span_opens_after_every_rank_has_started_its_profiler():
    profiler = RecordingProfiler()
    clock = StepClock(warmup=1, window_steps=2, windows=1, samples_per_step=1, sync=lambda: profiler.calls.append("sync"),
                      profiler=profiler, profile_windows=1)
    clock.start()
    for _ in range(1 + 2 * 2):
        clock.step_done()
    # The sync after start is a barrier under DDP: the other ranks' profilers start there, outside the span.
    began = profiler.calls.index("start")
    assert profiler.calls[began:began + 3] == ["start", "sync", "mark"]


def test_each_instant_goes_to_the_category_running_then():
    spans = [Span(0.0, 4.0, "backward"), Span(3.0, 6.0, "communication"),  # 3-4 hidden under backward
             Span(5.0, 7.0, "framework"), Span(8.0, 9.0, "input")]
    seconds = partition(spans, 0.0, 10.0)
    assert seconds == {"forward": 0.0, "backward": 4.0, "optimizer": 0.0, "input": 1.0, "communication": 2.0,
                       "framework": 1.0, "idle": 2.0}
    assert sum(seconds.values()) == 10.0
    kept = summary(spans, 0.0, 10.0, steps=2, top_ops=[("conv", 1.0, 4)], trace="t")
    assert kept["communication_in_flight_ms"] == 1500.0 and kept["overlap"] == pytest.approx(1 / 3)
    assert kept["breakdown_ms"]["backward"] == 2000.0 and kept["top_ops"] == [["conv", 500.0, 2.0]]


@pytest.fixture(scope="module")
def profiled(tmp_path_factory):
    """torch-single, tf-single and torch-ddp / tf-mirrored on 2 slots, profiled, on the quick task."""
    out = tmp_path_factory.mktemp("profiled")
    for variant, devices in (("torch-single", 1), ("tf-single", 1), ("torch-ddp", 2), ("tf-mirrored", 2)):
        done = bench("run", "--variant", variant, "--devices", str(devices), "--task", "quick", "--profile",
                     "--out", str(out), env=CPU, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
    assert bench("report", str(out), timeout=300).returncode == 0
    return out, {(r["variant"], r["world_size"]): r for r in rows(out)}


@pytest.mark.slow
@pytest.mark.parametrize("variant,devices", [("torch-single", 1), ("tf-single", 1), ("torch-ddp", 2),
                                             ("tf-mirrored", 2)])
def test_a_profiled_run_adds_up_and_leaves_its_trace(profiled, variant, devices):
    out, by_config = profiled
    row = by_config[(variant, devices)]
    p = row["profile"]
    assert row["status"] == "ok" and row["eval_samples"] == 397  # digits' test split, every sample once
    assert len(row["throughput"]["windows"]) == row["windows"]  # the profiled windows are not among them
    assert p["steps"] == PROFILED_WINDOWS * row["window_steps"]
    assert row["environment"]["malloc"] == MALLOC_TUNED  # every rank ran with the tuned allocator
    assert sum(p["breakdown_ms"].values()) == pytest.approx(p["step_ms"], rel=1e-6)
    # The trace spans what the clock timed: its marker opens after the sync that follows every rank's profiler start
    # and closes at the same boundary (within 0.03 ms on an idle machine). The allowance is for a loaded one, where
    # the run's one Python thread can be descheduled between the clock's boundary and the marker's for a few ms.
    assert p["step_ms"] * p["steps"] == pytest.approx(p["clocked_step_ms"] * p["steps"], rel=0.05, abs=15.0)
    assert set(p["breakdown_ms"]) == set(CATEGORIES)
    assert p["breakdown_ms"]["forward"] > 0 and p["breakdown_ms"]["backward"] > 0
    assert any("conv" in name.lower() for name, _, _ in p["top_ops"])
    if devices > 1:  # the gradients' all-reduce is seen in flight, hidden or exposed
        assert p["communication_in_flight_ms"] > 0 and 0 <= p["overlap"] <= 1
    trace = next((out / "runs").glob(f"*{variant}-1x{devices}*")) / "profile" / p["trace"]
    if variant.startswith("torch"):
        with gzip.open(trace, "rt") as f:
            names = {e.get("name") for e in json.load(f)["traceEvents"]}
        assert {"dtbench.forward", "dtbench.backward"} <= names  # opens in Perfetto / chrome://tracing
    else:
        assert trace.suffix == ".pb" and trace.stat().st_size > 0  # TensorBoard's profile plugin reads it


@pytest.mark.slow
def test_the_report_shows_where_the_profiled_step_goes(profiled):
    out, _ = profiled
    report = (out / "report.md").read_text()
    section = report[report.index("### Where the profiled step goes"):]
    assert all(f"| {v} " in section for v in ("torch-single", "tf-single", "torch-ddp", "tf-mirrored"))
    assert "Where the profiled step goes" in (out / "report.html").read_text()


def test_profile_is_refused_where_it_is_not_wired(tmp_path):
    done = cli("run", "--variant", "tf-ps", "--devices", "2", "--task", "quick", "--profile",
               "--out", str(tmp_path), env=CPU)
    assert done.returncode == 2 and "--profile is not wired for tf-ps" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_why_the_winner_is_faster_compares_the_categories_at_each_sides_unprofiled_step():
    from bench.report.profiles import why_faster
    from bench.analysis.repeats import Ratio
    from bench.analysis.verdict import Comparison, Group

    def profile(step, unprofiled, forward, backward):
        parts = dict.fromkeys(CATEGORIES, 0.0) | {"forward": forward, "backward": backward,
                                                   "idle": step - forward - backward}
        return {"step_ms": step, "unprofiled_ms": unprofiled, "overhead": step / unprofiled - 1, "parts": parts,
                "top_ops": [["conv", 1.0, 1.0]]}

    fast, slow = {"key": "tf", "series": "tf-single"}, {"key": "torch", "series": "torch-single"}
    group = Group("1 CPU slot", winner=fast, comparisons=[Comparison(slow, Ratio(1.5, 1.4, 1.6, True), False)])
    profiles = {"tf": profile(10.0, 10.0, 4.0, 5.0), "torch": profile(20.0, 15.0, 8.0, 10.0)}  # torch's +33 %
    [sentence] = why_faster([group], profiles)
    assert "tf-single's step takes 10.0 ms, torch-single's 15.0 ms (1.50x" in sentence
    assert "backward 7.5 vs 5.0 ms (+2.5)" in sentence and "forward 6.0 vs 4.0 ms (+2.0)" in sentence
