"""The projection's arithmetic (bench.projection.projection) against figures worked by hand."""
from pathlib import Path

import pytest

from bench.projection import projection
from bench.projection.projection import Link
from bench.analysis.folder import Folder

PSI = 100e6  # bytes of gradients (25 M fp32 parameters)


def test_wire_bytes_are_the_zero_papers_volumes_but_deepspeeds_zero3_within_its_reuse_distance():
    # 2Ψ for DDP and ZeRO-1/2, 3Ψ for FSDP, each times (N-1)/N on a ring. DeepSpeed's ZeRO-3 keeps a model of
    # 25 M elements gathered from its forward to its backward (reuse distance 1e9): 2Ψ; one of 600 M elements: 3Ψ.
    assert projection.wire_bytes("ddp", PSI, 8) == pytest.approx(2 * PSI * 7 / 8)
    assert projection.wire_bytes("zero-1", PSI, 8) == pytest.approx(2 * PSI * 7 / 8)
    assert projection.wire_bytes("zero-2", PSI, 4) == pytest.approx(2 * PSI * 3 / 4)
    assert projection.wire_bytes("zero-3", PSI, 8) == pytest.approx(2 * PSI * 7 / 8)
    assert projection.wire_bytes("fsdp", PSI, 2) == pytest.approx(3 * PSI / 2)


def test_zero3_gathers_again_in_the_backward_only_past_half_its_reuse_distance():
    assert projection.wire_bytes("zero-3", PSI, 8, elements=25e6) == pytest.approx(2 * PSI * 7 / 8)
    assert projection.wire_bytes("zero-3", 24 * PSI, 8, elements=600e6) == pytest.approx(3 * 24 * PSI * 7 / 8)


def test_communication_time_from_each_collectives_alpha_and_beta():
    links = {"all_reduce": Link(50e-6, 10e9), "all_gather": Link(20e-6, 12e9), "reduce_scatter": Link(30e-6, 8e9)}
    # DDP on 8: 50 µs + 100 MB x 2 x 7/8 / 10 GB/s = 0.00005 + 0.0175 s
    assert projection.communication_s("ddp", PSI, 8, links) == pytest.approx(50e-6 + 0.0175)
    # ZeRO-2 on 4: reduce-scatter 30 µs + 100 MB x 3/4 / 8 GB/s, all-gather 20 µs + 100 MB x 3/4 / 12 GB/s
    assert projection.communication_s("zero-2", PSI, 4, links) == pytest.approx(
        30e-6 + 75e6 / 8e9 + 20e-6 + 75e6 / 12e9)
    # FSDP on 2 with 10 units: two all-gathers and a reduce-scatter, each paying its latency per unit
    assert projection.communication_s("fsdp", PSI, 2, links, units=10) == pytest.approx(
        2 * (10 * 20e-6 + 50e6 / 12e9) + (10 * 30e-6 + 50e6 / 8e9))
    assert projection.communication_s("ddp", PSI, 1, links) == 0.0


def test_overlap_measured_at_two_devices_carries_to_more():
    link = {"all_reduce": Link(0.0, 1e9)}
    at_two = projection.communication_s("ddp", PSI, 2, link)  # 100 MB x 1 / 1 GB/s = 0.1 s
    assert at_two == pytest.approx(0.1)
    # Measured: compute 0.30 s, step at 2 devices 0.34 s: 0.04 of the predicted 0.1 s showed, 60 % hidden.
    hidden = projection.hidden_share(0.34, 0.30, at_two)
    assert hidden == pytest.approx(0.6)
    at_eight = projection.communication_s("ddp", PSI, 8, link)  # 100 MB x 2 x 7/8 = 0.175 s
    assert projection.step_s(0.30, at_eight, hidden) == pytest.approx(0.30 + 0.4 * 0.175)
    assert projection.hidden_share(0.29, 0.30, at_two) == 1.0  # faster than compute: all hidden, no more
    assert projection.hidden_share(0.60, 0.30, at_two) == 0.0  # more exposed than predicted: none hidden


def test_model_state_per_rank_shards_as_each_kind_does():
    parts = {"parameters": 100.0, "gradients": 100.0, "optimizer": 200.0, "master_weights": 0.0}
    assert projection.model_state_bytes("ddp", parts, 8) == 400.0
    assert projection.model_state_bytes("zero-1", parts, 8) == 100 + 100 + 200 / 8
    assert projection.model_state_bytes("zero-2", parts, 8) == 100 + 300 / 8
    assert projection.model_state_bytes("fsdp", parts, 8) == 400 / 8
    assert projection.model_state_bytes("zero-3", {**parts, "master_weights": 100.0}, 4) == 500 / 4


def approach(step_at_2_s: float, kind: str = "ddp"):
    from bench.projection import project

    parts = {"parameters": 1e6, "gradients": 1e6, "optimizer": 2e6}
    return project.Approach("x", "torch", kind, 100, 1e6, parts, None, 500.0, (0.010, 0.010, 0.010), 2,
                            (step_at_2_s, step_at_2_s, step_at_2_s), None)


@pytest.mark.parametrize("step_at_2_s, step_at_8_s", [
    (0.012, 0.010 + 8.75e-3),              # the 2 ms predicted at 2 all exposed: nothing hidden, nothing else
    (0.011, 0.010 + 8.75e-3),              # half hidden at 2, but 1 MB is one DDP bucket, ready as the backward
                                           # ends: none of it can hide at 8
    (0.015, 0.010 + 8.75e-3 + 0.003),      # 3 ms beyond the communication: held at 8 as it was measured at 2
])
def test_a_projected_step_is_compute_plus_exposed_communication_plus_what_the_measured_n_took_beyond_it(
        step_at_2_s, step_at_8_s):
    """Ψ = 1 MB all-reduced on a link of α 1 ms and 1 GB/s: 2 ms at 2 ranks (bus factor 1); at 8 the ring's
    latency is 7 hops (7 ms) and the bytes 1.75 MB (1.75 ms)."""
    from bench.projection import project

    near = {c: Link(1e-3, 1e9) for c in projection.BUS_FACTOR}
    one, two, eight = project.project(approach(step_at_2_s), near, 0.0, (1, 2, 8), 8, None)
    assert one.efficiency[0] == pytest.approx(1.0) and one.throughput[0] == pytest.approx(100 / 0.010)
    assert two.throughput[0] == pytest.approx(200 / step_at_2_s)  # the measured point, reproduced
    assert eight.throughput[0] == pytest.approx(800 / step_at_8_s)
    assert eight.efficiency[0] == pytest.approx(0.010 / step_at_8_s)
    assert eight.memory_mb == pytest.approx(4e6 / 2**20 + 500.0)  # DDP keeps the whole model state on each rank


def test_the_interval_spans_the_fits_residual_and_a_node_boundary_switches_links():
    from bench.projection import project

    near = {c: Link(1e-3, 1e9) for c in projection.BUS_FACTOR}
    [eight] = project.project(approach(0.012), near, 0.1, (8,), 8, None)
    # The fit 10 % high: 2.2 ms predicted at 2 where 2 ms were exposed, so 1/11 of it hidden there; at 8 its one
    # bucket cannot hide: all 9.625 ms exposed. 10 % low: 1.8 ms, all exposed, and 0.2 ms that is not
    # communication, held.
    assert eight.throughput[1] == pytest.approx(800 / (0.010 + 1.1 * 8.75e-3))
    assert eight.throughput[2] == pytest.approx(800 / (0.010 + 0.9 * 8.75e-3 + 0.2e-3))
    # Beyond 4 devices a node: the given link (α 1 µs at 2 ranks, 100 GB/s), 7 hops and 1.75 MB at 8.
    far = {c: Link(1e-6, 100e9) for c in projection.BUS_FACTOR}
    [across] = project.project(approach(0.012), near, 0.0, (8,), 4, far)
    assert across.throughput[0] == pytest.approx(800 / (0.010 + 7e-6 + 1.75e6 / 100e9))


def test_named_links_carry_nccls_latencies_and_their_published_bandwidths():
    from bench.projection import networks

    h100 = networks.WITHIN_NODE["nvlink-h100"].links()
    # NCCL's Ring/Simple: 8.4 µs base + 3.4 µs a step over NVLink; an all-reduce on 2 ranks takes 2 steps, the
    # others 1; 18 NVLinks of 20.6 GB/s.
    assert h100["all_reduce"].alpha_s == pytest.approx(15.2e-6) and h100["all_gather"].alpha_s == pytest.approx(11.8e-6)
    assert h100["reduce_scatter"].busbw == pytest.approx(18 * 20.6e9)
    ib = networks.BETWEEN_NODES["ib-8x400g"].links()["all_reduce"]
    assert ib.alpha_s == pytest.approx(36.4e-6) and ib.busbw == pytest.approx(8 * 400e9 / 8)
    assert networks.BETWEEN_NODES["ethernet-25g"].links()["all_gather"].busbw == pytest.approx(25e9 / 8)
    assert all("nccl" in n.source.lower() for n in [*networks.WITHIN_NODE.values(), *networks.BETWEEN_NODES.values()])


def test_a_named_node_link_replaces_the_measured_one_beyond_the_measured_step_only():
    """The measured step at 2 keeps its own link for what it hid (none: 2 ms predicted, 2 ms exposed); at 8
    devices a node, the node's named link (α at 2 ranks, 7 hops at 8) carries the all-reduce."""
    from bench.projection import project

    near = {c: Link(1e-3, 1e9) for c in projection.BUS_FACTOR}
    inside = {c: Link(10e-6, 100e9) for c in projection.BUS_FACTOR}
    [eight] = project.project(approach(0.012), near, 0.0, (8,), 8, None, inside=inside)
    assert eight.throughput[0] == pytest.approx(800 / (0.010 + 7 * 10e-6 + 1.75e6 / 100e9))


def test_projected_model_state_at_the_measured_count_is_what_each_rank_measured():
    """The committed reference: every approach's model state projected to the devices it ran on equals the
    bytes its ranks counted there; DeepSpeed's ZeRO-1 measured its gradients divided, as the projection now
    takes them, where the ZeRO paper's stage 1 would keep them whole (20 % more here)."""
    from pathlib import Path

    from bench.projection import project
    from bench.results import ResultStore, peak
    from bench.analysis import aggregate
    from bench.results.frame import frame

    folder = Path("results/reference-cpu")
    configs = aggregate.configurations(frame(ResultStore(folder).dicts()), peak.load(folder))
    found, _ = project.approaches(configs)
    assert len(found) >= 8
    for a in found:
        [measured] = configs[(configs["series"] == a.series) & (configs["world_size"] == a.measured_n)
                             & ~configs["independent"].astype(bool)]["model_state_mb"]
        projected = projection.model_state_bytes(a.kind, a.parts, a.measured_n, a.sharded) / 2**20
        assert projected == pytest.approx(measured, rel=0.01), a.series
    zero1 = next(a for a in found if a.kind == "zero-1")
    assert "gradients" in zero1.sharded
    assert projection.model_state_bytes("zero-1", zero1.parts, 2) / 2**20 > 1.15 * projection.model_state_bytes(
        "zero-1", zero1.parts, 2, zero1.sharded) / 2**20


def test_fsdp_memory_shards_the_whole_state():
    from bench.projection import project

    near = {c: Link(1e-3, 1e9) for c in projection.BUS_FACTOR}
    [eight] = project.project(approach(0.012, "fsdp"), near, 0.0, (8,), 8, None)
    assert eight.memory_mb == pytest.approx(4e6 / 8 / 2**20 + 500.0)


def test_bench_project_on_the_committed_reference_prints_projected_figures_and_draws_them(tmp_path):
    import shutil

    from helpers import cli

    folder = tmp_path / "reference-cpu"
    shutil.copytree("results/reference-cpu", folder)
    (folder / "projection.png").unlink()  # the committed one: the figure checked is the one drawn here
    result = cli("project", str(folder))
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert out.startswith("PROJECTED, not measured")
    for series in ("torch-ddp", "torch-fsdp", "deepspeed (ZeRO-3)", "lightning", "accelerate", "tf-multiworker"):
        assert f"| {series} |" in out
    assert "tf-ps (asynchronous): asynchronous" in out and "tf-mirrored: one process drives every device" in out
    assert "fit stands in" not in out  # the reference measured all-gather and reduce-scatter too (collectives.jsonl)
    assert (folder / "projection.png").stat().st_size > 10_000
    named = cli("project", str(folder), "--within-node", "nvlink-h100", "--network", "ib-8x400g").stdout
    assert "within a node of 8: nvlink-h100, all-reduce α 15.2 µs, busbw 370.8 GB/s" in named
    assert "beyond 8 devices a node: all-reduce α 36.4 µs, busbw 400 GB/s (8 InfiniBand NDR NICs" in named
    bad = cli("project", str(folder), "--alpha-us", "5")
    assert bad.returncode == 2 and bad.stderr.strip().splitlines() == [
        "error: give the link between nodes whole: --alpha-us US and --busbw-gbps GB/S together"]


def test_the_report_projects_after_every_measured_figure_and_says_so_first(tmp_path):
    """report.md's last section is the projection: headed not measured, its caveat before its table, the figure
    drawn; a folder run on one device only has none."""
    import json
    import shutil

    from bench.projection import project
    from bench.report.report import write_report

    folder = tmp_path / "reference-cpu"
    shutil.copytree("results/reference-cpu", folder)
    (folder / "projection.png").unlink()  # the committed one: the figure checked is the one drawn here
    runs = (folder / "results.jsonl").read_text().splitlines(keepends=True)
    two = [line for line in runs if json.loads(line)["variant"] in ("torch-ddp", "tf-mirrored")]  # a third the time
    (folder / "results.jsonl").write_text("".join(two))
    report = write_report(Folder.read(folder)).read_text()
    section = report[report.index("## Projected to more devices (not measured)"):]
    assert "\n## " not in section.split("\n", 1)[1]  # the last section: no measured one after it
    assert section.index("PROJECTED, not measured") < section.index("| torch-ddp ") < section.index("![projection]")
    header = next(line for line in section.splitlines() if line.startswith("| approach"))
    assert [c.strip() for c in header.strip("|").split("|")][-6:] == [
        "1 device", "2 devices", "8 devices", "64 devices", "512 devices", "extrapolated (past the check)"]
    assert (folder / "projection.png").stat().st_size > 10_000
    one_device = tmp_path / "compile"
    shutil.copytree("results/reference-cpu-compile", one_device)
    assert project.section(Folder.read(one_device)) == [] and not (one_device / "projection.png").exists()


def _collective_rows(path, nodes: int, links: dict, world: int = 2) -> None:
    """A folder's collective tables as `bench collectives` writes them: every size timed on each collective's line
    α + size x bus factor / busbw (`links`: collective -> (α, busbw)), at `world` ranks over `nodes` nodes."""
    import json

    from bench.spec.collectives import BUS_FACTOR

    path.mkdir(parents=True, exist_ok=True)
    for collective, (alpha_s, busbw) in links.items():
        table = path / ("allreduce.jsonl" if collective == "all_reduce" else "collectives.jsonl")
        with table.open("a") as f:
            for size in (4096, 65536, 1 << 20, 1 << 24):
                row = {"backend": "gloo", "device_type": "cpu", "nodes": nodes, "devices_per_node": world // nodes,
                       "world_size": world, "size_bytes": size,
                       "seconds": alpha_s + size * BUS_FACTOR[collective](world) / busbw}
                f.write(json.dumps(row if collective == "all_reduce" else {"collective": collective, **row}) + "\n")


def test_the_link_between_nodes_as_bench_collectives_measured_it_across_two_hosts(tmp_path):
    from bench.projection import project
    from bench.spec.task import SpecError

    measured = {"all_reduce": (200e-6, 25e6), "all_gather": (150e-6, 24e6), "reduce_scatter": (300e-6, 12e6)}
    _collective_rows(tmp_path / "across", nodes=2, links=measured)  # a 200 Mbit/s link, each collective its own
    _collective_rows(tmp_path / "across", nodes=4, links=measured, world=4)  # more ranks: not the fewest
    links = project.between_nodes(tmp_path / "across")
    for collective, (alpha_s, busbw) in measured.items():
        assert links[collective].alpha_s == pytest.approx(alpha_s, rel=1e-3)
        assert links[collective].busbw == pytest.approx(busbw, rel=1e-3)
    # Measured only at 4 ranks: α as at 2 ranks (a third of it: 3 hops), which project() grows again.
    _collective_rows(tmp_path / "four", nodes=4, links={"all_reduce": (300e-6, 25e6)}, world=4)
    four = project.between_nodes(tmp_path / "four")
    assert four["all_gather"].alpha_s == pytest.approx(100e-6, rel=1e-3)  # the all-reduce's fit stands in
    _collective_rows(tmp_path / "one-host", nodes=1, links={c: (50e-6, 1e9) for c in measured})
    with pytest.raises(SpecError, match="no collective measured across nodes there"):
        project.between_nodes(tmp_path / "one-host")
    # Two devices on two nodes of one device: the step is compute + exposed communication on that link + the rest
    # measured on one host. DDP: 1 MB all-reduced at 2 ranks over 25 MB/s = 40 ms + 0.2 ms; none hidden.
    near = {c: Link(50e-6, 1e9) for c in projection.BUS_FACTOR}
    one_host_step = 0.010 + 1e6 / 1e9 + 50e-6 + 0.002  # compute, communication on one host, 2 ms of the rest
    links = {c: Link(200e-6, 25e6) for c in projection.BUS_FACTOR}
    [across] = project.project(approach(one_host_step), near, 0.0, (2,), 1, links)
    assert 100 * 2 / across.throughput[0] == pytest.approx(0.010 + 0.040 + 200e-6 + 0.002, rel=1e-3)


def test_the_interval_is_widened_by_the_projections_measured_error_beyond_one_device():
    from bench.projection import project

    near = {c: Link(0.0, 1e9) for c in projection.BUS_FACTOR}
    one, eight = project.project(approach(0.012), near, 0.0, (1, 8), 8, None, error=0.10)
    plain = project.project(approach(0.012), near, 0.0, (8,), 8, None)[0]
    step = 100 * 8 / plain.throughput[0]  # every input exact: one step, no spread
    assert eight.throughput[0] == plain.throughput[0]
    assert eight.throughput[1] == pytest.approx(100 * 8 / (step * 1.10))
    assert eight.throughput[2] == pytest.approx(100 * 8 / (step * 0.90))
    assert one.throughput[1] == one.throughput[2] == one.throughput[0]  # one device: measured, not projected
    check = {"worst_error": 0.1, "date": "2026-11-27T04:00:00+00:00", "within_10_percent": 9, "configurations": 10,
             "not_measured": 2}
    assert project.checked(check).startswith("widened by the projection's worst error on points held out of its "
                                             "fitting (±10%)")
    assert "9 of 10 held-out configurations within ±10 %, 2 not measured" in project.checked(check)


def test_each_figure_carries_its_kinds_held_out_error_and_says_where_it_extrapolates():
    """Issue 75, items 3 and 4: the interval is widened by the held-out error of the approach's traffic (the
    worst of any where its kind was not held out), shown beside the figure; a link slower than the check's slowest,
    or a step more communication-bound than any it held out, is named on the figure's line."""
    from bench.projection import project

    check = {"worst_error": 0.3, "worst_error_by_kind": {"ddp": 0.05}, "slowest_link_gbps": 0.01,
             "most_exposed_fraction": 0.8, "date": "2026-12-02T14:00:00+00:00", "within_10_percent": 3,
             "configurations": 4}
    assert project.held_out_error(check, "ddp") == 0.05 and project.held_out_error(check, "fsdp") == 0.3
    assert project.held_out_error(None, "ddp") == 0.0
    near = {c: Link(1e-3, 1e9) for c in projection.BUS_FACTOR}
    checked_link = {c: Link(1e-3, 0.02e9) for c in projection.BUS_FACTOR}  # 1 MB in 50 ms: the step 84 % exposed
    slower = {c: Link(1e-3, 0.005e9) for c in projection.BUS_FACTOR}
    [fast] = project.project(approach(0.012), near, 0.0, (2,), 1, {c: Link(1e-3, 1e9) for c in near}, 0.05,
                             covered=check)
    assert fast.error == 0.05 and fast.beyond == ""
    [exposed] = project.project(approach(0.012), near, 0.0, (2,), 1, checked_link, 0.05, covered=check)
    assert exposed.beyond == "communication 84% of the step, past the checked 80%"
    [slow] = project.project(approach(0.012), near, 0.0, (2,), 1, slower, 0.05, covered=check)
    assert slow.beyond.startswith("a link slower than any checked (80 Mbit/s)")
    result = {"approaches": [approach(0.012)], "table": {"x": [fast]}, "near": near}
    cells = project.table(result)
    assert "±5%" in cells["2 devices"][0] and cells["extrapolated (past the check)"][0] == "–"
    result["table"] = {"x": [slow]}
    assert project.table(result)["extrapolated (past the check)"][0].startswith("2: a link slower than any checked")


def test_bench_collectives_and_project_refuse_what_they_cannot_measure_or_mix(tmp_path):
    from helpers import cli

    one = cli("collectives", "--devices", "1", "--out", str(tmp_path))
    assert one.returncode == 2 and one.stderr.strip() == "error: --devices 1: a collective needs at least 2 ranks"
    both = cli("project", "results/reference-cpu", "--between-nodes", str(tmp_path), "--alpha-us", "5",
               "--busbw-gbps", "1")
    assert both.returncode == 2 and "name the link between nodes once" in both.stderr
    twice = cli("project", "results/reference-cpu", "--network", "ib-8x400g", "--between-nodes", str(tmp_path))
    assert twice.returncode == 2 and "name the link between nodes once" in twice.stderr
    unknown = cli("project", "results/reference-cpu", "--within-node", "nvlink-b200")
    assert unknown.returncode == 2 and unknown.stderr.strip().splitlines() == [
        "error: --within-node 'nvlink-b200': one of nvlink-a100, nvlink-h100 (or leave it out: the links the sweep "
        "measured)"]
    missing = cli("project", "results/reference-cpu", "--between-nodes", str(tmp_path))
    assert missing.returncode == 2 and len(missing.stderr.strip().splitlines()) == 1
    assert "no collective measured across nodes there: run `bench collectives" in missing.stderr


def test_held_against_deeplearningexamples_resnet50_on_a_dgx_a100():
    """Issue 41, item 5: the projection's step (communication_s, step_s: what project() sums at each count) fed the
    published inputs of NVIDIA DeepLearningExamples' PyTorch ResNet-50 v1.5 (README, pytorch-21.03 container, DGX
    A100 80GB, 256 images a GPU), against the published 8-GPU figures; the errors are the ones docs/projection.md
    states. Inputs: the 1-GPU throughputs (the README); ResNet-50's
    25,557,032 fp32 gradients all-reduced by torch DDP (native AMP keeps fp32 parameters); busbw 230 GB/s (NCCL's
    maintainer on 8x A100-SXM4, nccl-tests issue 149) and α 33.7 µs (a DGX A100 user, nccl-tests issue 123). No
    2-GPU figure is published: nothing hidden, no rest."""
    link = {c: Link(33.7e-6, 230e9) for c in projection.BUS_FACTOR}
    comm = projection.communication_s("ddp", 25_557_032 * 4, 8, link)
    assert comm == pytest.approx(0.81e-3, rel=0.01)  # 102 MB x 2 x 7/8 / 230 GB/s + α
    errors = {}
    for precision, one_gpu, eight_gpus in (("tf32", 938, 7248), ("amp", 2470, 16621)):
        projected = 8 * 256 / projection.step_s(256 / one_gpu, comm, hidden=0.0)
        errors[precision] = projected / eight_gpus - 1
    assert errors["tf32"] == pytest.approx(0.032, abs=0.001)
    assert errors["amp"] == pytest.approx(0.180, abs=0.001)  # what the 8 GPUs lose is not communication


@pytest.mark.parametrize("framework, compute_s", [("torch", 0.05), ("torch", 0.4), ("accelerate", 1.5),
                                                  ("lightning-fabric", 3.0), ("tensorflow", 0.4)])
def test_a_communication_bound_ddp_step_is_never_faster_than_its_link(framework, compute_s):
    """Issue 75: the 2-slot run hid all its all-reduce (step = compute), which carried to a 92 Mbit/s link once
    claimed 172 samples/s where the link carries 19.7 MB of gradients in 1.8 s (75 samples/s at most). Whatever the
    share hidden where it was measured, a step at least carries its gradients over the link, and with PyTorch's
    buckets the last one (ready only as the backward ends) is never hidden."""
    from bench.projection import project

    psi = 19.7e6
    a = project.Approach("x", framework, "ddp", 64, psi, {"parameters": psi}, None, None,
                         (compute_s,) * 3, 2, (compute_s,) * 3, None)
    near = {c: Link(1e-3, 1e9) for c in projection.BUS_FACTOR}
    far = {c: Link(2.4e-3, 92e6 / 8) for c in projection.BUS_FACTOR}
    [two] = project.project(a, near, 0.0, (2,), 1, far)
    link_bound = 128 / projection.communication_s("ddp", psi, 2, far)
    assert two.throughput[0] <= link_bound and two.throughput[2] <= link_bound
    if framework != "tensorflow":  # buckets of 1 MiB, then the rest (18.8 MiB, under 25): the rest all exposed
        last = far["all_reduce"].seconds("all_reduce", psi - 2**20, 2)
        first = far["all_reduce"].seconds("all_reduce", 2**20, 2)
        assert two.throughput[0] == pytest.approx(128 / (compute_s + last + max(0.0, first - 2 / 3 * compute_s)))


HELD_OUT = Path("results/projection-heldout-cpu")


def reprojected(model: str, rate: str, elements: float | None = None) -> dict:
    """Each approach of one committed check point projected again from its one-host runs and the link measured
    across the hosts (what benchmarks/projection_check.py did), with `elements` in place of the model's."""
    import dataclasses

    from bench.projection import project

    far = project.between_nodes(HELD_OUT / f"link-{rate}")
    result = project.folder(Folder.read(HELD_OUT / model / "round-1" / "one-host"), counts=(2,), devices_per_node=1,
                            far=far)
    out = {}
    for a in result["approaches"]:
        if elements is not None:
            a = dataclasses.replace(a, parameters=elements)
        [point] = project.project(a, result["near"], result["residual"], (2,), 1, far)
        out[a.series] = (a, point, far, result["residual"])
    return out


def committed_points() -> list[dict]:
    """The held-out points the committed check measured."""
    import json

    lines = [json.loads(line) for line in (HELD_OUT / "check.jsonl").read_text().splitlines()]
    return [line for line in lines if "measured" in line and line["split"] == "held-out"]


@pytest.mark.skipif(not (HELD_OUT / "check.jsonl").exists(), reason="the held-out check is not committed")
def test_the_held_out_points_rebuilt_from_their_inputs_never_beat_their_link():
    """Issue 75: every committed point, projected again from its own one-host inputs, is the figure the check
    recorded, and none exceeds the link-bound throughput (the torch-ddp resnet10t point at
    100 Mbit/s was once projected 2.6x its measured 65 samples/s)."""
    points = committed_points()
    assert any(p["model"] == "timm-resnet10t" and p["rate"] == "100mbit" and p["kind"] == "ddp" for p in points)
    for (model, rate) in {(p["model"], p["rate"]) for p in points}:
        for series, (a, point, far, residual) in reprojected(model, rate).items():
            for line in [p for p in points if (p["model"], p["rate"], p["series"]) == (model, rate, series)]:
                assert point.throughput[0] == pytest.approx(line["predicted"], rel=1e-6)
            bound = a.per_device_batch * 2 / projection.communication_s(a.kind, a.grad_bytes, 2, far,
                                                                          elements=a.parameters)
            assert point.throughput[0] <= bound * (1 + 1e-9), (model, rate, series)
            # the interval's top: the link as fast as the fits' residual allows
            assert point.throughput[2] <= bound / (1 - residual) * (1 + 1e-9), (model, rate, series)


@pytest.mark.skipif(not (HELD_OUT / "check.jsonl").exists(), reason="the held-out check is not committed")
def test_zero3_gathered_once_a_step_is_nearer_the_measured_than_the_papers_three_volumes():
    """Issue 75: DeepSpeed's ZeRO-3 was under-projected by a steady 12-22 %. Counted as DeepSpeed runs it (one
    all-gather a step within its reuse distance), each committed held-out ZeRO-3 point on a shaped link is nearer
    what the two hosts measured than with the backward's second all-gather (a model past the distance), on each
    link under 200 Mbit/s (where the issue measured the bias, and the count rather than the compute decides)."""
    points = [p for p in committed_points() if p["kind"] == "zero-3" and p["link_busbw_gbps"] * 8 < 0.2]
    assert points
    for p in points:
        [(_, once, _, _)] = [v for s, v in reprojected(p["model"], p["rate"]).items() if s == p["series"]]
        [(_, twice, _, _)] = [v for s, v in reprojected(p["model"], p["rate"], elements=6e8).items()
                              if s == p["series"]]
        assert abs(once.throughput[0] / p["measured"] - 1) < abs(twice.throughput[0] / p["measured"] - 1), p["rate"]
