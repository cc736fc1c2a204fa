"""The collectives' α–β fit (bench.results.collectives), checked against times made from known α and busbw."""
import json

import pytest

from bench.report import report
from bench.results import ResultStore, collectives
from bench.analysis.folder import Folder
from test_report import row as report_row

SIZES = [1 << k for k in range(12, 27, 2)]


def measured(collective: str, world: int, alpha_s: float, busbw: float, nodes: int = 1, off: dict | None = None):
    factor = collectives.BUS_FACTOR[collective](world)
    rows = [{"collective": collective, "backend": "gloo", "device_type": "cpu", "nodes": nodes,
             "devices_per_node": world // nodes, "world_size": world, "size_bytes": size,
             "seconds": (alpha_s + size * factor / busbw) * (off or {}).get(size, 1.0)} for size in SIZES]
    return [dict(r, busbw_gbps=r["size_bytes"] / r["seconds"] * factor / 1e9) for r in rows]


def test_the_fit_recovers_the_latency_and_bus_bandwidth_of_each_collective():
    table = (measured("all_reduce", 4, 50e-6, 10e9) + measured("all_gather", 4, 20e-6, 12e9)
             + measured("reduce_scatter", 4, 30e-6, 8e9) + measured("all_reduce", 8, 90e-6, 2e9, nodes=2))
    fitted = {(f.collective, f.world_size): f for f in collectives.fits(table)}
    for (name, world), alpha, busbw in ((("all_reduce", 4), 50e-6, 10e9), (("all_gather", 4), 20e-6, 12e9),
                                        (("reduce_scatter", 4), 30e-6, 8e9), (("all_reduce", 8), 90e-6, 2e9)):
        f = fitted[(name, world)]
        assert f.alpha_s == pytest.approx(alpha, rel=1e-6) and f.busbw == pytest.approx(busbw, rel=1e-6)
        assert f.worst_residual < 1e-9
    # A 64 MiB all-reduce on 4 ranks: 2 * 3/4 * 64 MiB over 10 GB/s, plus 50 µs.
    assert fitted[("all_reduce", 4)].seconds(1 << 26) == pytest.approx(50e-6 + 1.5 * (1 << 26) / 10e9)
    assert fitted[("all_reduce", 8)].nodes == 2


def test_a_size_off_the_line_shows_as_its_residual_and_a_negative_latency_is_not_fitted():
    # One size 30 % slow: the fit follows the rest, and that size's residual says how far off it is.
    table = measured("all_reduce", 2, 100e-6, 1e9, off={1 << 20: 1.3})
    [f] = collectives.fits(table)
    assert f.residuals[SIZES.index(1 << 20)] == pytest.approx(0.3 / 1.3, abs=0.03)
    assert f.worst_residual == pytest.approx(abs(f.residuals[SIZES.index(1 << 20)]))
    # Pure bandwidth with the small sizes a little fast: a free line would cross zero below; α is held at 0.
    table = measured("all_gather", 2, 0.0, 1e9, off={1 << 12: 0.9})
    [f] = collectives.fits(table)
    assert f.alpha_s == 0.0 and f.busbw == pytest.approx(1e9, rel=0.05)


def test_too_few_sizes_one_rank_or_no_bandwidth_are_not_fitted():
    assert collectives.fits(measured("all_reduce", 2, 1e-4, 1e9)[:2]) == []
    flat = [dict(r, seconds=2e-3 * (1 - i / 100)) for i, r in enumerate(measured("all_reduce", 2, 1e-4, 1e9))]
    assert collectives.fits(flat) == []  # time falls as size grows: noise, no bandwidth to give
    assert collectives.fits([dict(r, world_size=1) for r in measured("all_reduce", 2, 1e-4, 1e9)]) == []


def test_the_report_gives_each_collectives_fit_and_an_older_all_reduce_table_is_read_as_one(tmp_path):
    store = ResultStore(tmp_path)
    store.append(report_row("torch-ddp", 2, 7000.0))
    older = [{k: v for k, v in r.items() if k != "collective"} for r in measured("all_reduce", 2, 2e-3, 0.9e9)]
    (tmp_path / "allreduce.jsonl").write_text("".join(json.dumps(r) + "\n" for r in older))
    (tmp_path / collectives.FILE).write_text("".join(
        json.dumps(r) + "\n" for r in measured("reduce_scatter", 2, 1e-3, 0.5e9)))
    text = report.write_report(Folder.read(tmp_path)).read_text()
    section = text.split("## Collectives: latency and bandwidth (α–β fit)")[1]
    cells = [[c.strip() for c in line.strip("|").split("|")] for line in section.splitlines()
             if line.startswith("| all-") or line.startswith("| reduce-")]
    assert cells == [["all-reduce", "gloo (cpu)", "2 (1x2)", "2,000", "0.900", "0 %", "8"],
                     ["reduce-scatter", "gloo (cpu)", "2 (1x2)", "1,000", "0.500", "0 %", "8"]]


def test_a_resumed_sweep_measures_the_collectives_a_folder_from_before_them_lacks(tmp_path, monkeypatch):
    """--resume: a topology with only the all-reduce (a folder from before all-gather and reduce-scatter) is
    measured again; one with all three is not."""
    from bench.studies import microbench
    from helpers import result_row

    older = [{k: v for k, v in r.items() if k != "collective"} for r in measured("all_reduce", 2, 1e-3, 1e9)]
    (tmp_path / "allreduce.jsonl").write_text("".join(json.dumps(r) + "\n" for r in older))
    ResultStore(tmp_path).append(result_row("torch-ddp", 2))
    asked = []
    monkeypatch.setattr(microbench, "measure_collectives", lambda out, machine, *topology: asked.append(topology))
    microbench.communication_for_sweep([], tmp_path, machine=None, again=False)
    assert asked == [("cpu", 1, 2)]
    (tmp_path / collectives.FILE).write_text("".join(json.dumps(r) + "\n" for r in
                                                     measured("all_gather", 2, 1e-3, 1e9)
                                                     + measured("reduce_scatter", 2, 1e-3, 1e9)))
    asked.clear()
    microbench.communication_for_sweep([], tmp_path, machine=None, again=False)
    assert asked == []
