"""Report generation from a fixed results file: tables hold every row, every plot is written."""
import dataclasses
import json
import re

import pandas as pd
import pytest

from bench.report import plots, report, step_breakdown
from bench.results import allreduce
from bench.analysis import aggregate
from bench.results import ResultStore
from bench.results.frame import frame, records_of
from bench.analysis.folder import Folder
from helpers import result_row

TASK = {"name": "default", "model": "small-cnn", "dataset": "fashion-mnist", "precision": "fp32",
        "global_batch": 128, "target_accuracy": 0.85, "params": 105866}


def has_row(markdown: str, variant: str, devices: str, *cells: str) -> bool:
    """A markdown table line starting with these cells (padded or not); the batch cell (third) may be left out."""
    if cells and "/dev, " not in cells[0]:
        cells = ("*", *cells)
    pattern = [rf"\s*{re.escape(c)}\s*" if c != "*" else "[^|]*" for c in (variant, devices, *cells)]
    return re.search(r"^\|" + r"\|".join(pattern) + r"\|", markdown, re.M) is not None


def configurations(rows):
    return aggregate.configurations(frame([r.to_dict() for r in rows]))


def row(variant, world, median, *, independent=False, status="ok", framework="torch", step=20.0):
    figures = dict(throughput={"median": median, "ci_low": median * 0.9, "ci_high": median * 1.1,
                               "windows": [median] * 6},
                   per_device_throughput=median / world, step_time_ms={"median": step, "p90": step * 1.1},
                   startup_s=4.0, test_accuracy=None if independent else 0.88, eval_samples=None if independent else 10000,
                   time_to_accuracy_s=None if independent else 9.0,
                   curves={"steps": [[10 * i, 1280 * i, 0.5 * i, 2.0 / i] for i in range(1, 9)],
                           "epochs": [[1, 5120, 2.0, 1.0, 0.8, 0.7], [2, 10240, 4.0, 0.5, 0.4, 0.88]]}
                   ) if status == "ok" else {}
    return result_row(variant, world, run_id=f"{variant}-{world}-{independent}", status=status, framework=framework,
                      task=dict(TASK), independent=independent,
                      error=None if status == "ok" else "not applicable: one slot", **{"throughput": None, **figures})


@pytest.fixture
def store(tmp_path):
    s = ResultStore(tmp_path)
    for r in (row("torch-ddp", 1, 5000.0), row("torch-ddp", 2, 7000.0, step=18.0),
              row("torch-ddp", 2, 9000.0, independent=True, step=14.0),
              row("tf-mirrored", 1, 8000.0, framework="tensorflow-cpu"),
              row("tf-mirrored", 2, 10000.0, framework="tensorflow-cpu"),
              row("torch-dp", 2, 0, status="skipped")):
        s.append(r)
    bench_rows = [{"backend": "gloo", "device_type": "cpu", "nodes": 1, "devices_per_node": 2, "world_size": 2,
                   "size_bytes": size, "seconds": seconds, "algbw_gbps": size / seconds / 1e9,
                   "busbw_gbps": size / seconds / 1e9} for size, seconds in ((262144, 0.001), (1048576, 0.002))]
    (tmp_path / "allreduce.jsonl").write_text("".join(json.dumps(r) + "\n" for r in bench_rows))
    return s


def test_report_has_every_row_every_plot_and_the_analysis(store):
    path = report.write_report(Folder.read(store.directory))
    text = path.read_text()
    assert has_row(text, "torch-ddp", "1 cpu", "ok") and has_row(text, "torch-ddp", "2 cpu", "ok")
    assert has_row(text, "torch-ddp (no sync)", "2 cpu", "ok")
    assert has_row(text, "tf-mirrored", "2 cpu", "ok") and has_row(text, "torch-dp", "2 cpu", "n/a")
    assert "## task default (small-cnn at 28 px)/fp32, strong scaling" in text and "same global batch" in text
    assert has_row(text, "torch-ddp", "2 cpu", "128 (64/dev, strong)", "ok")
    for name in ("throughput", "efficiency", "accuracy", "startup", "loss", "step-breakdown"):
        png = store.directory / f"default-fp32-strong-{name}.png"
        assert png.stat().st_size > 10_000, name
        assert f"]({png.name})" in text
    assert "**9,000" not in text  # a no-sync run never wins a column
    assert "## All-reduce microbenchmark" in text and "Where the step time goes" in text
    assert (store.directory / "results.csv").read_text().count("\n") == 7


def test_breakdown_figures():
    rows = [row("torch-ddp", 2, 7000.0, step=18.0), row("torch-ddp", 2, 9000.0, independent=True, step=14.0)]
    table = [{"world_size": 2, "nodes": 1, "size_bytes": s, "seconds": t} for s, t in ((262144, 0.001), (1048576, 0.002))]
    [entry] = step_breakdown.entries(configurations(rows), table)
    assert entry["compute_ms"] == 14.0
    assert entry["comm_cost"] == pytest.approx(1 - 7000 / 9000)
    grad_bytes = 105866 * 4  # between the two sizes: time interpolated linearly
    seconds = 0.001 + 0.001 * (grad_bytes - 262144) / (1048576 - 262144)
    assert entry["floor_ms"] == pytest.approx(1000 * seconds)


def test_busbw_and_floor_formulas():
    table = [{"world_size": 4, "nodes": 1, "size_bytes": 1 << 20, "seconds": 0.01}]
    busbw = allreduce.busbw_at(table, 4, 1, 1 << 20)
    assert busbw == pytest.approx((1 << 20) / 0.01 * 2 * 3 / 4)
    assert allreduce.communication_floor_ms(1 << 20, 4, busbw) == pytest.approx(10.0)
    assert allreduce.busbw_at(table, 8, 1, 1 << 20) is None


def test_repeats_fold_into_one_row_with_the_range_over_runs(tmp_path):
    runs = [row("torch-ddp", 1, m) for m in (1000.0, 2000.0, 1500.0)]
    runs += [row("torch-ddp", 2, m) for m in (2400.0, 2600.0, 2500.0)]
    one, two = configurations(runs).to_dict("records")
    assert one["throughput"] == 1500 and (one["ci_low"], one["ci_high"]) == (1000, 2000)
    assert two["runs"] == 3 and two["per_device_throughput"] == 1250
    assert two["scaling_efficiency"] == pytest.approx(2500 / (2 * 1500))
    store = ResultStore(tmp_path)
    for r in runs:
        store.append(r)
    text = report.write_report(Folder.read(tmp_path)).read_text()
    assert "6 runs in `results.jsonl`, repeats folded into 2 rows" in text
    assert "1,500 [1,000, 2,000] (3 runs)" in text


def test_sweep_repeats_round_robin():
    from bench.sweep import plan
    from bench.spec.task import get_task
    from bench.spec.variants import get_variant

    specs = plan.rounds(plan.plan([get_variant("torch-ddp"), get_variant("accelerate")], get_task("quick"), "cpu",
                                  [1, 2]), 2)
    labels = [(s.variant.name, s.world_size) for s in specs]
    assert labels == [("torch-ddp", 1), ("torch-ddp", 2), ("accelerate", 1), ("accelerate", 2)] * 2


def test_a_sweep_runs_its_main_comparison_first_then_baselines_twins_and_fewer_devices():
    """Each approach at the most devices first (the verdict's main comparison, a provisional answer after it),
    then every other run in the plan's own order."""
    from bench.sweep import plan
    from bench.spec.task import get_task
    from bench.spec.variants import get_variant

    planned = plan.plan([get_variant(v) for v in ("torch-single", "torch-ddp", "accelerate")], get_task("quick"),
                        "cpu", [1, 2], analysis=True)
    ordered, first = plan.answer_first(planned)
    label = [(s.variant.name, s.world_size, s.independent, s.task.data.input) for s in ordered]
    assert first == 2 and label[:2] == [("torch-ddp", 2, False, "memory"), ("accelerate", 2, False, "memory")]
    rest = [s for s in planned if s not in ordered[:2]]
    assert ordered[2:] == rest and sorted(map(id, ordered)) == sorted(map(id, planned))
    assert ("torch-single", 1, False, "memory") == label[2]  # the baseline, then the twins and 1-slot runs


@pytest.mark.parametrize("mlflow", [False, True])
def test_the_sweep_command_runs_the_main_comparison_first_with_or_without_mlflow(tmp_path, monkeypatch, mlflow):
    """MLflow's derived figures are logged once the sweep ends, from the whole folder: the order is the same."""
    import signal

    from bench import cli
    from bench.interrupt import STOP_SIGNALS
    from bench.sweep import runner
    from bench.studies import audit, microbench

    ran = []

    def run_all(specs, *args, **kwargs):
        ran.extend(specs)
        raise KeyboardInterrupt

    monkeypatch.setattr(runner, "run_all", run_all)
    monkeypatch.setattr(microbench, "peak_for_sweep", lambda *a, **k: None)
    monkeypatch.setattr(audit, "audit", lambda *a, **k: None)
    handlers = {signum: signal.getsignal(signum) for signum in STOP_SIGNALS}  # main() installs its own
    try:
        with pytest.raises(KeyboardInterrupt):
            cli.main(["sweep", "--task", "quick", "--variants", "torch-ddp,accelerate", "--max-devices", "2",
                      "--out", str(tmp_path), *(["--mlflow", f"sqlite:///{tmp_path}/m.db"] if mlflow else [])])
    finally:
        for signum, handler in handlers.items():
            signal.signal(signum, handler)
    first = (ran[0].variant.name, ran[0].world_size)
    assert first == ("torch-ddp", 2), [s.key.label for s in ran]


def test_no_sync_runs_are_their_own_series():
    series = plots._series(configurations([row("torch-ddp", 1, 5000.0), row("torch-ddp", 2, 7000.0),
                                           row("torch-ddp", 2, 9000.0, independent=True)]).to_dict("records"))
    assert {k: [r["world_size"] for r in v] for k, v in series.items()} == {"torch-ddp": [1, 2],
                                                                            "torch-ddp (no sync)": [2]}


def test_the_same_rows_give_the_same_efficiencies_with_and_without_repeats():
    """One rule: a configuration's efficiency does not depend on whether the sweep had repeats."""
    single = [row("torch-single", 1, 4000.0), row("torch-ddp", 1, 5000.0), row("torch-ddp", 2, 7000.0),
              row("torch-ddp", 2, 9000.0, independent=True)]
    repeated = [dataclasses.replace(r, run_id=f"{r.run_id}-{i}") for i in range(3) for r in single]
    figures = ["series", "world_size", "scaling_efficiency", "scaling_efficiency_vs_single"]
    once, thrice = (configurations(rows)[figures] for rows in (single, repeated))
    pd.testing.assert_frame_equal(once, thrice)
    by_series = once.set_index(["series", "world_size"])
    assert by_series.loc[("torch-ddp", 2), "scaling_efficiency"] == pytest.approx(7000 / (2 * 5000))
    assert by_series.loc[("torch-ddp", 2), "scaling_efficiency_vs_single"] == pytest.approx(7000 / (2 * 4000))
    assert pd.isna(by_series.loc[("torch-ddp (no sync)", 2), "scaling_efficiency"])  # the bound, not a result


def test_efficiencies_are_derived_from_the_whole_folder_never_read_from_a_row(tmp_path):
    """Rows up to schema 2 stored an efficiency as the store stood when they were written: a snapshot."""
    old = {**row("torch-ddp", 2, 7000.0).to_dict(), "schema_version": 2, "scaling_efficiency": 9.99, "mfu": 0.5}
    s = ResultStore(tmp_path)
    for r in (row("torch-single", 1, 4000.0), row("torch-ddp", 1, 6000.0), row("torch-ddp", 1, 4000.0)):
        s.append(r)
    with open(s.jsonl, "a") as f:
        f.write(json.dumps(old) + "\n")
    assert "scaling_efficiency" not in s.dicts()[-1] and "scaling_efficiency" not in row("torch-ddp", 2, 1.0).to_dict()
    configs = aggregate.configurations(frame(s.dicts()))
    [two] = configs[[k.world_size == 2 for k in configs["key"]]].to_dict("records")
    assert two["scaling_efficiency"] == pytest.approx(7000 / (2 * 5000))  # the median of the two one-device runs
    assert two["scaling_efficiency_vs_single"] == pytest.approx(7000 / (2 * 4000))
    assert pd.isna(two["mfu"])  # no data-sheet peak for a CPU: the stored 0.5 is not a figure


def test_weak_and_strong_runs_are_reported_apart_each_against_its_own_baseline(tmp_path):
    """Weak: efficiency against one device at the same per-device batch; strong: at the same global batch."""
    weak = {**TASK, "scaling": "weak"}
    s = ResultStore(tmp_path)
    for r in (row("torch-ddp", 1, 5000.0), row("torch-ddp", 2, 6000.0),                  # strong, global 128
              row("torch-ddp", 1, 4000.0), row("torch-ddp", 2, 7200.0)):                 # weak, 128 a device
        s.append(r)
    rows = s.rows()
    rows[2].task, rows[3].task = dict(weak), {**weak, "global_batch": 256}
    rows[0].run_id, rows[2].run_id = "strong-1", "weak-1"
    (tmp_path / "results.jsonl").write_text("".join(json.dumps(r.to_dict()) + "\n" for r in rows))
    configs = aggregate.configurations(frame(ResultStore(tmp_path).dicts()))
    by = {(k.scaling, k.world_size): e for k, e in zip(configs["key"], configs["scaling_efficiency"])}
    assert by[("strong", 2)] == pytest.approx(6000 / (2 * 5000))
    assert by[("weak", 2)] == pytest.approx(7200 / (2 * 4000))   # vs the weak one-device run, not the strong
    assert len(set(configs["key"])) == 4
    text = report.write_report(Folder.read(tmp_path)).read_text()
    assert "## task default (small-cnn at 28 px)/fp32, weak scaling" in text and "## task default (small-cnn at 28 px)/fp32, strong scaling" in text
    assert has_row(text, "torch-ddp", "2 cpu", "256 (128/dev, weak)", "ok")
    assert (tmp_path / "default-fp32-weak-efficiency.png").exists()


def test_your_own_functions_row_shows_no_batch_of_the_task_it_never_trained():
    from bench.report.tables import row_cells

    own = row("fn-train", 2, 3000.0)
    own.function = {"module": "train", "name": "train", "file": "train.py", "source_sha256": "0" * 64}
    built_in = row("torch-ddp", 2, 3000.0)
    lines = records_of(aggregate.configurations(frame([own.to_dict(), built_in.to_dict()])))
    cells = {line["variant"]: row_cells(line) for line in lines}
    assert cells["fn-train"][2] == "the function's"
    assert cells["torch-ddp"][2].startswith(f"{TASK['global_batch']} (")


def test_a_twin_shares_its_runs_hue_and_unmeasured_figures_draw_no_bar(store):
    from bench.analysis import style

    rows = configurations(store.rows()).to_dict("records")
    palette = style.colours(rows)
    real, bound = (next(r for r in rows if r["series"] == s and r["world_size"] == 2)
                   for s in ("torch-ddp", "torch-ddp (no sync)"))
    assert style.line_style(bound, palette)["color"] == style.lighter(palette["torch-ddp"], 0.35)
    assert style.line_style(bound, palette)["ls"] == "--" and style.line_style(real, palette)["ls"] == "-"
    assert len(set(palette.values())) == len(palette)  # one colour per approach
    report.write_report(Folder.read(store.directory))
    assert (store.directory / "default-fp32-strong-verdict.png").stat().st_size > 10_000
    entries = step_breakdown.entries(configurations(store.rows()), [])
    assert [e["compute_ms"] for e in entries] == [14.0, None]  # tf-mirrored has no no-sync twin: no bar, not 0


def test_no_legend_of_a_whole_sweep_holds_more_than_ten_entries_or_two_alike(tmp_path, monkeypatch):
    """Every variant of the default sweep at 1 and 2 slots (27 series): each plot splits them so that a legend holds
    at most ten, and no two of its entries share a colour and a line style."""
    from matplotlib import colors

    from bench.metrics import memory
    from bench.spec.variants import VARIANTS

    store = ResultStore(tmp_path)
    for name, variant in VARIANTS.items():
        if not variant.in_default_sweep:
            continue
        framework = "tensorflow-cpu" if name.startswith("tf-") else "torch"
        for world in (1, 2) if variant.max_devices is None else (1,):
            r = row(name, world, 4000.0 + 100 * world + len(name), framework=framework)
            state = {str(rank): {"parameters": 400_000, "gradients": 400_000, "optimizer": 400_000} for rank in range(world)}
            store.append(dataclasses.replace(r, peak_memory_mb=800.0 + 10 * world + len(name),
                                             memory={"model_state_bytes": state}))
    legends = []

    def keep_legends(fig, path):  # instead of writing the PNG: what its legends hold
        for legend in [*fig.legends, *(ax.get_legend() for ax in fig.axes)]:
            if legend is not None:
                legends.append((path.name, [(colors.to_hex(h.get_color()) if hasattr(h, "get_color") else None,
                                             str(h.get_linestyle()) if hasattr(h, "get_linestyle") else None,
                                             h.get_marker() if hasattr(h, "get_marker") else None)
                                            for h in legend.legend_handles]))
        plots.plt.close(fig)

    monkeypatch.setattr(plots, "_save", keep_legends)
    configs = aggregate.configurations(frame(store.dicts()))
    plots.draw_all(configs, tmp_path, "default-fp32-strong")
    plots.draw_memory(memory.entries(configs), tmp_path, "default-fp32-strong")
    drawn = {name for name, _ in legends}
    assert {"default-fp32-strong-loss.png", "default-fp32-strong-memory.png",
            "default-fp32-strong-throughput.png"} <= drawn, drawn
    for name, entries in legends:
        assert len(entries) <= 10, (name, len(entries))
        assert len(set(entries)) == len(entries), (name, entries)


def test_v_logs_dtbenchs_own_steps_not_every_fonts_score_while_the_figures_are_drawn(tmp_path):
    """-v sets DEBUG for every logger: matplotlib's font manager then printed ~40 lines of scores a figure."""
    from helpers import bench
    from test_verdict import run

    store = ResultStore(tmp_path)
    for row in (run("torch-ddp", 1000.0), run("deepspeed", 800.0, zero_stage=2)):
        store.append(row.to_dict())
    done = bench("report", "-v", str(tmp_path))
    assert done.returncode == 0 and (tmp_path / "report.md").exists()
    assert "findfont" not in done.stdout + done.stderr
