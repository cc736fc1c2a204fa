"""The metric registry (bench/metrics) and the figure added through it alone: cost at a price per device-hour."""
import pytest

from bench import metrics
from bench.analysis import tables
from bench.analysis.verdict import verdict_lines
from bench.results import ResultStore, load
from bench.analysis import aggregate
from bench.analysis.folder import Folder
from bench.spec.rank_record import FirstStep, Result
from helpers import CPU, cli
from test_report import row as report_row

def folder(tmp_path):
    """torch-ddp at 3,600 samples/s on 1 slot and 6,000 on 2; an epoch of 5,120 samples."""
    store = ResultStore(tmp_path)
    store.append(report_row("torch-ddp", 1, 3600.0))
    store.append(report_row("torch-ddp", 2, 6000.0))
    return tmp_path


def test_every_column_and_repeat_fold_is_declared_by_one_metric_only():
    names = [c.name for m in metrics.REGISTRY for c in m.columns]
    headers = [c.header for m in metrics.REGISTRY for c in m.columns]
    folds = [column for m in metrics.REGISTRY for column, _ in m.repeats]
    assert len(names) == len(set(names)) and len(headers) == len(set(headers)) and len(folds) == len(set(folds))
    assert set(metrics.repeat_folds().values()) <= {"median", "max"}


def test_the_price_gives_each_configuration_its_cost_per_million_samples_and_per_epoch(tmp_path):
    configs = aggregate.configurations(load(folder(tmp_path)), settings={"price_per_device_hour": 3.6})
    one, two = configs.to_dict("records")
    # $3.60 a device-hour is $0.001 a device-second: 1 device at 3,600 samples/s, 2 devices at 6,000
    assert one["cost_per_million_samples"] == pytest.approx(1e6 / 3600 * 0.001)
    assert two["cost_per_million_samples"] == pytest.approx(1e6 / 6000 * 2 * 0.001)
    assert one["cost_per_epoch"] == pytest.approx(5120 / 3600 * 0.001)
    assert "$ / M samples" in tables.cells(configs).columns and "$ / epoch" in tables.cells(configs).columns


def test_without_a_price_there_is_no_cost_column_and_the_table_is_as_before(tmp_path):
    configs = aggregate.configurations(load(folder(tmp_path)))
    assert "cost_per_million_samples" not in configs
    assert list(tables.cells(configs).columns)[-1] == "of meas. peak"


def test_the_verdict_states_the_winners_cost_when_priced(tmp_path):
    [line] = [s for s in verdict_lines(Folder.read(folder(tmp_path), {"price_per_device_hour": 3.6})) if "2 CPU slots" in s]
    assert "$0.333 per million samples at $3.6 a device-hour" in line
    assert not any("per million samples" in s for s in verdict_lines(Folder.read(tmp_path)))


def test_bench_report_takes_the_price_and_refuses_a_price_that_is_not_one(tmp_path):
    folder(tmp_path)
    result = cli("report", str(tmp_path), "--price-per-device-hour", "3.6", env=CPU)
    assert result.returncode == 0, result.stderr
    assert "$ / M samples" in result.stdout and "$0.333 per million samples" in result.stdout
    assert "$ / M samples" in (tmp_path / "report.html").read_text()
    refused = cli("report", str(tmp_path), "--price-per-device-hour", "-2", env=CPU)
    assert refused.returncode == 2 and "above 0" in refused.stderr.strip().splitlines()[-1]


def test_stragglers_fold_over_repeats_and_show_under_their_task(tmp_path):
    """Three runs of one configuration: each rank's median own time, and the slowest rank and how far it is behind
    read from those medians (not from any one run), so that the sentence and the table agree."""
    import dataclasses

    from bench.analysis import report

    store = ResultStore(tmp_path)
    store.append(report_row("torch-ddp", 1, 3600.0))
    for i, own in enumerate(({"0": 10.0, "1": 13.0}, {"0": 10.0, "1": 14.0}, {"0": 16.0, "1": 10.0})):
        slowest = max(own, key=own.get)
        store.append(dataclasses.replace(report_row("torch-ddp", 2, 6000.0), run_id=f"r{i}", rank_times={
            "own_ms": own, "slowest_rank": int(slowest), "behind_median": own[slowest] / 11.5 - 1, "spread": 0.1}))
    two = aggregate.configurations(load(tmp_path)).to_dict("records")[1]
    assert two["runs"] == 3 and (two["rank_times.own_ms.0"], two["rank_times.own_ms.1"]) == (10.0, 13.0)
    assert two["rank_times.slowest_rank"] == 1 and two["rank_times.behind_median"] == pytest.approx(13 / 11.5 - 1)
    text = report.write_report(Folder.read(tmp_path)).read_text()
    task_part, folder_part = text.split("## task ")[1], text.split("## task ")[0]
    assert "### Stragglers" in task_part and "Stragglers" not in folder_part
    assert "| 0: 10.00, 1: 13.00 " in task_part
    assert "rank 1 is a straggler, 13% behind the median rank (13.00 ms of its own a step against the median " \
           "rank's 11.50)" in task_part


def ranks(cpu_by_rank: dict[int, list[float]], world: int = 2) -> metrics.Ranks:
    """Ranks whose windows of 3 steps x 32 samples took 0.1 s each, with `cpu_by_rank` CPU seconds a window."""
    results = {rank: Result(rank=rank, window_seconds=[0.1] * len(cpu), window_steps=3, samples_per_window=96,
                            train_s=1.0, peak_memory_mb=100.0 + rank, window_cpu_seconds=cpu)
               for rank, cpu in cpu_by_rank.items()}
    records = {rank: [FirstStep(rank=rank, time=10.0 + rank)] for rank in results}
    return metrics.Ranks(results, records, world, launch_time=9.0)


def test_the_row_is_every_metrics_fold_of_the_ranks_reports():
    row = metrics.fold(ranks({0: [0.1, 0.1], 1: [0.1, 0.1]}))
    assert row["throughput"]["median"] == pytest.approx(960.0) and row["per_device_throughput"] == pytest.approx(480.0)
    assert row["step_time_ms"]["median"] == pytest.approx(100 / 3)
    assert row["startup_s"] == pytest.approx(2.0)  # to the slowest rank's first step
    assert row["peak_memory_mb"] == 101.0 and row["rank_times"] is None
    # Each rank's 0.2 CPU seconds over its half of 192 samples: 2.08 ms a sample
    assert row["host_cpu_ms_per_sample"] == pytest.approx(1e3 * 0.2 / 96)
    # A rank twice as busy on the same samples: the mean of the ranks
    assert metrics.fold(ranks({0: [0.1, 0.1], 1: [0.2, 0.2]}))["host_cpu_ms_per_sample"] == pytest.approx(1e3 * 0.3 / 96)
    assert metrics.fold(ranks({0: [0.1, 0.1], 1: []}))["host_cpu_ms_per_sample"] is None


def test_host_cpu_is_in_the_table_with_the_cores_it_keeps_busy_and_absent_where_no_row_has_it(tmp_path):
    store = ResultStore(tmp_path)
    one, two = report_row("torch-ddp", 1, 3600.0), report_row("torch-ddp", 2, 6000.0)
    one.host_cpu_ms_per_sample, two.host_cpu_ms_per_sample = 0.25, 0.3
    store.append(one)
    store.append(two)
    configs = Folder.read(tmp_path).configs
    assert list(configs["host_cores_busy"]) == pytest.approx([0.9, 1.8])
    cells = tables.cells(configs)
    assert list(cells["host CPU ms / sample"]) == ["0.250", "0.300"] and list(cells["cores busy"]) == ["0.90", "1.80"]
    assert "host CPU ms / sample" not in tables.cells(aggregate.configurations(load(folder(tmp_path / "old")))).columns
