"""One run: write its spec, start its processes with the variant's own launcher, wait with the
timeout, kill whatever is left, and fold the ranks' reports into a result row."""
from __future__ import annotations

import contextlib
import glob
import json
import os
import shlex
import shutil
import stat
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from bench import REPO_ROOT
from bench.interrupt import Interrupted, held
from bench.metrics import memory
from bench.results.jsonl import RESULTS
from bench.results.row import ResultRow
from bench.results.store import ResultStore
from bench.run import environment as env_info
from bench.status import Status
from bench.worker import data
from bench.run import fold
from bench.hosts.exchange import NeverJoined, Offer, Session, meet
from bench.run.launch import PYTHON, processes, run_temp_dir
from bench.hosts.loopback import free_port, loopback_listener
from bench.run.processes import RUN_ID_ENV, Process, kill_run, spawn, start, wait
from bench.run.reaper import HARNESS_DIED, Reaper, partial
from bench.run.runspec import RunSpec
from bench.run import sampler, stacks
from bench.spec.devices import Machine, Placement
from bench.spec.rank_record import Joined, RankRecord
from bench.spec.rank_spec import NodePlan, RankSpec
from bench.worker import CHECKPOINT_DIR, FAULT_ENV
from bench.worker.turns import DUET_NOTE, TURNS_ENV


@dataclass
class Launched:
    """A finished launch: what ran, how it ended, and what every local rank reported."""
    run_id: str
    run_dir: Path
    placement: Placement
    command: str
    status: str            # ok | failed | timeout
    reason: str | None
    records: dict[int, list[RankRecord]]  # each local rank's report (bench.run.fold.read_rank_records)
    launch_time: float
    wall_s: float
    hosts: dict[int, str] | None = None  # a multi-host run: every node's "address (interface)" (bench.hosts.exchange)
    timeseries: dict | None = None       # the summary of what the run did over time (bench.run.sampler)
    watchdog: Reaper | None = None       # still holding the run's row: released once the caller has stored its own


def new_run_id(spec: RunSpec) -> str:
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    return f"{stamp}-{spec.variant.name}-{spec.nodes}x{spec.devices_per_node}-{uuid.uuid4().hex[:6]}"


def write_spec(spec: RunSpec, placement: Placement, run_id: str, run_dir: Path, data_path: Path | None) -> Path:
    """The spec every process of the run reads (`bench.worker.Worker`)."""
    doc = RankSpec(
        run_id=run_id, variant=spec.variant.name, approach=dict(spec.variant.approach), task=spec.task,
        data_path=str(data_path) if data_path else None, device_type=spec.device_type,
        images=data.images_root(spec.task),
        nodes=spec.nodes, devices_per_node=spec.devices_per_node, world_size=spec.world_size,
        run_dir=str(run_dir), oversubscribed=placement.oversubscribed, independent=spec.independent,
        engine=spec.engine, profile=spec.profile, log_model=spec.log_model,
        resume_from=str(spec.resume_from / CHECKPOINT_DIR) if spec.resume_from else None,
        node_plans=tuple(NodePlan(p.node_rank, p.cuda_visible, p.cpu_slots) for p in placement.nodes))
    path = run_dir / "spec.json"
    path.write_text(doc.to_json())
    return path


def start_store_host(spec: RunSpec, run_id: str, run_dir: Path) -> tuple[subprocess.Popen, int] | None:
    """For runs all on this host whose launcher joins a store (Launcher.joins_store): the rendezvous store on a socket bound to
    127.0.0.1 (torch's own would listen on every interface). Killed with the run. Not for `accelerate launch`: it checks
    that its port is free first, and on one machine moves to another port, on several refuses."""
    if spec.on_engine or not spec.all_local or not spec.launcher.joins_store:
        return None
    with loopback_listener() as sock:
        proc = spawn([sys.executable, "-m", "bench.hosts.rendezvous", "--fd", str(sock.fileno())],
                     {RUN_ID_ENV: run_id, "PYTHONPATH": str(REPO_ROOT)}, run_dir / "store.log",
                     pass_fds=[sock.fileno()])
        return proc, sock.getsockname()[1]


def start_and_wait(spec: RunSpec, out_dir: Path, machine: Machine, data_path: Path | None,
                   environment: dict | None = None) -> Launched:
    """Start every process of the run, wait with the timeout, kill whatever is left. With `environment`, the run
    is one of the store's: should the harness die before its row is stored, its watchdog records it; the caller
    stores the row, then releases `Launched.watchdog` (an interrupted run's: `Interrupted.watchdog`)."""
    placement = spec.check(machine)
    run_id = new_run_id(spec)
    run_dir = (out_dir / "runs" / run_id).resolve()
    temp = run_temp_dir(run_id)
    # The watchdog first, then the run's folder and its row: a harness killed before the row is whole leaves its
    # watchdog an empty folder, which it removes (bench.run.reaper.record); stopped or out of disk there, the
    # harness removes it itself.
    row = run_dir / ROW_IF_THE_HARNESS_DIES if environment is not None else None
    reaper = Reaper(run_id, row, out_dir / RESULTS if row else None)
    try:
        run_dir.mkdir(parents=True)
        if row:
            write_row_if_the_harness_dies(spec, run_id, row, environment)
    except BaseException:
        reaper.release()
        with contextlib.suppress(OSError):
            run_dir.rmdir()
        raise
    procs, command, to_start, session, series, stopped = [], None, [], None, None, None
    watchdog = reaper if row else None  # kept until the caller has stored the run's row
    status, reason = Status.FAILED, None  # what node 0's agent tells the others, should the launch itself raise
    launch_time = time.time()
    try:
        temp.mkdir(exist_ok=True)
        spec_path = write_spec(spec, placement, run_id, run_dir, data_path)
        if spec.host_node is not None:
            try:
                session = meet_hosts(spec)
            except NeverJoined as missing:
                return Launched(run_id, run_dir, placement, None, Status.FAILED, str(missing), {}, launch_time,
                                time.time() - launch_time, watchdog=watchdog)
        store = start_store_host(spec, run_id, run_dir)
        procs += [store[0]] if store else []
        to_start = processes(spec, placement, run_id, run_dir, spec_path, store[1] if store else None,
                             session and session.offers)
        background = " &" if len(to_start) > 1 else ""
        command = " ; ".join(
            "env " + " ".join(f"{k}={shlex.quote(v)}" for k, v in p.env.items() if k != RUN_ID_ENV)
            + " " + shlex.join(p.command) + background for p in to_start)
        launch_time = time.time()
        started, logs = start(to_start, run_dir, launch_time)
        procs += started
        series = start_sampler(spec, placement, run_dir, started)
        servers = frozenset(i for i, p in enumerate(to_start) if p.server)
        status, reason = wait(started, launch_time, spec.timeout_s, logs, servers, watch_hosts(spec, session),
                              fold.ResultWatch(run_dir, [r for r in spec.reporting_ranks if r in spec.local_ranks]))
        if session and spec.host_node != 0 and status == Status.OK:  # until node 0's agent has what it needs
            session.wait_for_close(max(0.0, spec.timeout_s - (time.time() - launch_time)))
    except Interrupted as stop:  # the sweep records the run as interrupted
        stop.run_id, stop.command, stop.watchdog, stopped = run_id, command, watchdog, stop
        raise
    except BaseException:  # the harness fails with an error of its own, which it reports: no row to wait for
        watchdog = None
        raise
    finally:
        if series:
            series.stop()  # before the kill: the samples end with the run
        kill_run(run_id, procs)
        if session:  # the other hosts' agents stop their processes now
            session.close(status if spec.host_node == 0 else None)
        if watchdog:
            watchdog.ended()
        else:
            reaper.release()
        remove_leftovers(to_start)
        stacks.remove_unused(run_dir)
        keep_temp(temp, run_dir / "tmp")
        records = fold.read_rank_records(run_dir)  # every process gone first, interrupted runs too
        timeseries, unsaved = saved(series, records)
        reason = "; ".join(filter(None, (reason, unsaved))) or None
        if stopped:
            stopped.timeseries = timeseries
    return Launched(run_id, run_dir, placement, command, status, reason, records,
                    launch_time, time.time() - launch_time,
                    {rank: f"{o.address} ({o.interface})" for rank, o in session.offers.items()} if session else None,
                    timeseries, watchdog)


ROW_IF_THE_HARNESS_DIES = "row-if-the-harness-dies.json"


def write_row_if_the_harness_dies(spec: RunSpec, run_id: str, path: Path, environment: dict) -> None:
    """The run's row should the harness die with it in flight, written beside it for its watchdog to append to
    the store (bench.run.reaper); kept once the run's processes ended, until the caller has stored the run's own
    row, and removed when the watchdog is released. Written beside, then moved into place."""
    row = base_row(spec, run_id, Status.INTERRUPTED, HARNESS_DIED)
    row.environment = environment
    try:
        partial(path).write_text(json.dumps(row.to_dict(), default=str))
        os.replace(partial(path), path)
    finally:
        partial(path).unlink(missing_ok=True)


def saved(series: sampler.Sampler | None, records: dict[int, list[RankRecord]]) -> tuple[dict | None, str | None]:
    """The time series written (its summary), or why not: a full disk costs the samples, never the row."""
    if series is None:
        return None, None
    try:
        return series.save(reported_slots(records)), None
    except OSError as exc:
        return None, f"its time series not saved: {exc.strerror or exc}"


def reported_slots(records: dict[int, list[RankRecord]]) -> dict[int, list[int]]:
    """rank -> the cores it reported being pinned to when it joined."""
    return {rank: joined[-1].cores for rank, events in records.items() if (joined := fold.of_kind(events, Joined))}


def start_sampler(spec: RunSpec, placement: Placement, run_dir: Path, started: list) -> sampler.Sampler | None:
    """What the run's local ranks (and GPUs) do over time, sampled from now until the run ends."""
    if spec.sample_every_s <= 0:
        return None
    gpus = [g for plan in placement.nodes for g in (plan.cuda_visible or [])] if spec.device_type == "cuda" else None
    return sampler.Sampler([p.pid for p in started], spec.launcher is PYTHON, run_dir, spec.sample_every_s, gpus).start()


CLOSE_GRACE_S = 60.0  # node 0's run ended ok: this host's ranks, finishing too, get this long to exit


def watch_hosts(spec: RunSpec, session: Session | None):
    """How a multi-host run ends on this host because of another (processes.wait's `stop`): node 0's agent
    sees another agent go away (its host died or was stopped) and fails the run naming it; another host ends
    when node 0's agent says the run ended: at once when it only serves (tf-ps) or its ranks are done; when
    node 0's run is ok, its ranks get CLOSE_GRACE_S to exit (a TensorFlow worker's servers take a while); when
    it failed, or node 0's agent went away without a word, the run fails here too."""
    if session is None:
        return lambda done: None
    ok_at: dict[int, float] = {}

    def stop(done: bool) -> tuple[str, str | None] | None:
        if spec.host_node == 0:
            gone = session.gone()
            names = ", ".join(f"node {r} ({session.offers[r].address})" for r in gone if r in session.offers)
            return ((Status.FAILED, f"the agent of {names} went away mid-run: its host died or it was stopped")
                    if gone else None)
        ended = session.ended()
        if ended is None:
            return None
        if done or (ended == Status.OK and time.time() - ok_at.setdefault(0, time.time()) > CLOSE_GRACE_S):
            return Status.OK, None  # node 0 has the row; what still ran here was exiting
        if ended != Status.OK:
            return Status.FAILED, f"node 0's run ended before this host's ranks finished ({ended})"
        return None

    return stop


def meet_hosts(spec: RunSpec) -> Session:
    """Every node of a multi-host run, met through node 0's agent before launch (bench.hosts.exchange), each with
    the ports it picked for its TensorFlow tasks."""
    offer = Offer(spec.host_node, spec.nodes, spec.variant.name, spec.interface.address, spec.interface.name,
                  [free_port() for _ in range(spec.launcher.ports(spec))])
    return meet(offer, (spec.master_addr, spec.master_port), spec.timeout_s)


def remove_leftovers(processes: list[Process]) -> None:
    """What the run's processes leave outside its folder and never remove (`Process.leftovers`)."""
    for path in {path for p in processes for pattern in p.leftovers for path in glob.glob(pattern)}:
        with contextlib.suppress(OSError):
            os.unlink(path)


def keep_temp(temp: Path, kept: Path) -> None:
    """What the run's processes left in their TMPDIR (torchelastic's error files), copied into the run folder;
    the sockets a killed process leaves are skipped. Never raises: a row is worth more than its leftovers."""
    def sockets(folder: str, names: list[str]) -> list[str]:
        return [n for n in names if stat.S_ISSOCK(os.lstat(os.path.join(folder, n)).st_mode)]

    try:
        shutil.copytree(temp, kept, ignore=sockets, symlinks=True)
    except (OSError, shutil.Error):
        pass
    shutil.rmtree(temp, ignore_errors=True)


def base_row(spec: RunSpec, run_id: str, status: str, error: str | None = None,
             started: float | None = None) -> ResultRow:
    """The row's identity and settings; `started` (epoch seconds) the run's launch, else now (a run that
    never launched: skipped, interrupted before its launch)."""
    timing = spec.task.timing
    return ResultRow(
        run_id=run_id, started_at=datetime.fromtimestamp(started or time.time(), timezone.utc).isoformat(
            timespec="seconds"), status=status,
        error=error, variant=spec.variant.name, framework=spec.variant.framework,
        launcher=spec.engine if spec.on_engine else spec.variant.launcher, engine=spec.row_engine,
        engine_address=spec.engine_address, device_type=spec.device_type, nodes=spec.nodes,
        devices_per_node=spec.devices_per_node, world_size=spec.world_size,
        cores_per_slot=spec.cores_per_slot if spec.device_type == "cpu" else None,
        task={**spec.task.to_dict(), "per_device_batch": spec.task.recipe.global_batch // spec.world_size,
              "warmup_epochs_applied": spec.task.effective_warmup_epochs},
        warmup_steps=timing.warmup_steps, window_steps=timing.window_steps, windows=timing.windows,
        independent=spec.independent, asynchronous=spec.variant.asynchronous, as_shipped=spec.as_shipped,
        function=dict(spec.variant.approach).get("function"),
        git_sha=env_info.git_sha(REPO_ROOT), host=env_info.host())


def execute(spec: RunSpec, out_dir: Path, machine: Machine, data_path: Path | None,
            environment: dict | None = None, store: ResultStore | None = None) -> ResultRow:
    """Launch one run and fold its reports into a row (never raises on a failed run). With `store`, the row is
    appended to it, an interrupted run's too (the Interrupted raised on carries it in `rows`), before the run's
    watchdog lets go of its own (bench.run.reaper): a harness killed in between loses no run."""
    environment = dict(environment or env_info.environment())
    try:
        run = start_and_wait(spec, out_dir, machine, data_path, environment)
    except Interrupted as stop:  # its processes are killed already: recorded, then the caller stops
        with released(stop.watchdog):
            if store is not None:
                stop.rows = [interrupted_row(spec, stop, environment)]
                store.append(stop.rows[0])
        raise
    row = None
    try:
        with held(), released(run.watchdog):  # the run has ended: a stop signal waits until its row is stored
            row = launched_row(spec, run, environment)
            if store is not None:
                store.append(row)
    except Interrupted as stop:  # one held meanwhile: the caller stops after this run, whose row is stored
        stop.rows = [row] if row is not None and store is not None else []
        raise
    return row


@contextlib.contextmanager
def released(watchdog: Reaper | None):
    """The run's watchdog let go once the block is done: its row stored, or the harness failing with an error it
    reports itself (a full disk: the row printed). Only a harness killed in the block leaves it to record."""
    try:
        yield
    finally:
        if watchdog:
            watchdog.release()


def interrupted_row(spec: RunSpec, stop: Interrupted, environment: dict) -> ResultRow:
    """The row of a run a stop signal ended (or that never launched: it gets an id of its own)."""
    row = base_row(spec, stop.run_id or new_run_id(spec), Status.INTERRUPTED,
                   f"{stop}: the run's processes were killed")
    row.environment, row.command, row.timeseries = environment, stop.command, stop.timeseries
    return row


def launched_row(spec: RunSpec, run: Launched, environment: dict) -> ResultRow:
    """The ended run's reports folded into its row."""
    row = base_row(spec, run.run_id, Status.FAILED, started=run.launch_time)
    row.environment = dict(environment)
    row.oversubscribed = run.placement.oversubscribed
    row.notes.extend(run.placement.warnings)
    if spec.device_type == "cpu" and spec.variant.cpu_limit_reason:
        row.notes.append(f"cpu: {spec.variant.cpu_limit_reason}")
    if spec.resume_from:
        row.resumed_from = spec.resume_from.name
    if spec.log_model and spec.independent:
        row.notes.append("--mlflow: no model logged: the replicas of an independent run diverged, none is the model")
    if os.environ.get(FAULT_ENV):
        row.notes.append(f"fault injected: {os.environ[FAULT_ENV]}")
    if os.environ.get(TURNS_ENV):
        row.notes.append(DUET_NOTE)
    if run.status == Status.OK and run.reason:  # processes still running after every rank's result, stopped
        row.notes.append(run.reason)
    row.command, row.wall_s = run.command, run.wall_s
    row.timeseries = run.timeseries
    if run.hosts:
        row.environment["hosts"] = {str(rank): address for rank, address in sorted(run.hosts.items())}
    if spec.task.data.input == "s3":  # where the objects came from (a MinIO row and an AWS row are not alike)
        from bench.worker import s3

        row.environment["s3_endpoint"] = s3.endpoint_label()

    if run.status == Status.OK and 0 not in spec.local_ranks:
        row.status = Status.OK  # rank 0's host measures; this host only ran its share
        row.notes.append(f"node {spec.host_node}'s share of a multi-host run: the row is collected on node 0's host")
        return row
    if run.status != Status.OK:
        row.status = run.status
        rank_error = fold.first_error(run.records) if run.status == Status.FAILED else None
        # Which process died and how, and on the same line the error a rank reported (the line a table shows),
        # its traceback's end below; without one, the log's last lines.
        row.error = f"{run.reason.splitlines()[0]} {rank_error}" if rank_error else run.reason
        if run.status == Status.FAILED and memory.ALLOCATION_REFUSED.search(row.error or ""):
            row.status = Status.DOES_NOT_FIT  # a result under the memory given, not a fault
            row.memory = {"refused_allocation_mb": memory.refused_mb(row.error)}
        return row
    try:
        measured = fold.fold(run.records, spec.world_size, spec.reporting_ranks, run.launch_time)
    except fold.FoldError as exc:
        row.error = str(exc)
        return row
    row.environment.update(measured.pop("worker_info"))
    row.notes.extend(measured.pop("notes"))
    row.task["params"] = measured.pop("params")
    for key, value in measured.items():
        setattr(row, key, value)
    row.wall_split = fold.wall_split(run.records, spec.reporting_ranks, run.launch_time, run.wall_s, row.train_s,
                                     row.first_step_s)
    if row.timeseries and row.timeseries.get("gpus") and row.startup_s is not None:
        row.timeseries["energy_j_per_sample"] = sampler.energy_per_sample(run.run_dir / sampler.FILE, row.startup_s,
                                                                          row.throughput["median"])
    row.status = Status.OK
    return row
