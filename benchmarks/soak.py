"""A soak of random faults (issue 42): quick sweeps of several approaches, on one node, on two fake nodes and across
two namespace hosts (bench.studies.netns), reading the quick task from memory, from an image folder or from a real
S3 server (moto's, on loopback), while a seeded chaos driver picks a random process of the run (the harness, node
1's agent, a launcher, a rank, a DataLoader worker, the rendezvous store, the run's watchdog, the S3 server) and a
random fault (SIGKILL, SIGTERM, SIGINT, SIGSTOP held past the run's timeout), closes a port the run listens on (`ss
-K`: the listener and every connection to it), or fills the results folder's disk (a small tmpfs), at a random
moment. After each trial:

- no process of the run is left (its run id in their environment or on their command line, its folder on their
  command line, or any process inside a namespace host);
- the store parses: no torn line;
- each planned run has at most one row, and a row that is not `ok` says why;
- `sweep --resume` completes the sweep: every row recorded before is still there, and each planned run has exactly
  one `ok` row, which trains to the same test loss and accuracy, to the last bit, as an undisturbed sweep's.

    python benchmarks/soak.py --trials 200 --seed 1 --out results/soak-cpu

Appends a line per trial to OUT/trials.jsonl (a rerun with the same --out goes on from the trials it holds) and
writes OUT/summary.md. Runs as root where it can make namespace hosts and mount a tmpfs; elsewhere it leaves those
trials out and says so. SIGINT and SIGTERM stop the trial under way and remove what it made. Not part of
`make test`; tests/test_soak.py runs a short one."""
from __future__ import annotations

import argparse
import collections
import contextlib
import fcntl
import importlib.util
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # this tree's bench, not an installed one's
from bench import REPO_ROOT
from bench.run.processes import kill_all_of_run, processes_of_run
from bench.studies import netns
from tests.s3server import S3Server

APPROACHES = ("torch-ddp", "torch-fsdp", "deepspeed", "lightning", "accelerate", "tf-multiworker")
ACROSS_HOSTS = ("torch-ddp", "torch-fsdp", "deepspeed", "tf-multiworker")
PLACEMENTS = ("one node", "two fake nodes", "two hosts")
# Memory as often as the others together: the quick task as users first run it. The S3 server listens on this
# host's loopback, which the namespace hosts cannot reach.
INPUTS = ("memory", "memory", "files", "s3")
# SIGSTOP costs a whole --timeout a trial: drawn half as often as each signal of the others.
FAULTS = ("SIGKILL", "SIGKILL", "SIGTERM", "SIGTERM", "SIGINT", "SIGINT", "SIGSTOP", "full disk", "closed port")
TARGETS = ("harness", "launcher", "rank", "store", "watchdog")
LAUNCHERS = ("torch.distributed.run", "deepspeed.launcher", "accelerate.commands.launch", "lightning_fabric.cli")
TIMEOUT_S = 40  # the run's --timeout by default: a stopped process is held past it
# Trains for seconds, not one: most faults land mid-training. From S3 each object is a request to the server, an
# epoch some seconds.
EPOCHS = {"memory": 20, "files": 20, "s3": 2}
CPU = {"CUDA_VISIBLE_DEVICES": ""}
DISK = "16m"  # a sweep's folder holds under 1 MB: room for it, filled at the fault's moment
PORTS = 29600  # across the hosts, a port a trial: a killed store's port may still be held


class S3Images:
    """The quick task's images on a real S3 server (moto's, on loopback only), for the trials that read from S3. A
    fault may stop or kill the server: `ready` lets a stopped one go on, and starts a killed one again with the
    images uploaded again."""
    URL = "s3://dtbench/quick"

    def __init__(self):
        self.server: S3Server | None = None

    def ready(self) -> "S3Images":
        if self.server is not None and self.server.process.poll() is None:
            os.kill(self.server.process.pid, signal.SIGCONT)
            return self
        self.server = S3Server()
        upload = subprocess.run([sys.executable, "-m", "bench", "data", "export-images", "--task", "quick", self.URL],
                                cwd=REPO_ROOT, env={**os.environ, **self.env()}, capture_output=True, text=True)
        if upload.returncode != 0:
            raise SystemExit(f"soak: the images did not upload to S3: {upload.stderr.strip()[-300:]}")
        return self

    def env(self) -> dict[str, str]:
        return self.server.env() if self.server else {}

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()


@dataclass
class Soak:
    """What every trial shares: where they write, each run's --timeout, the namespace hosts (None where this machine
    cannot make them), the inputs' sources, the undisturbed sweeps (shared by drivers at once), and the trial under
    way (for the stop signals' clean-up)."""
    out: Path
    timeout_s: int
    hosts: tuple | None
    images: Path
    references: Path | None = None
    inputs: tuple[str, ...] = INPUTS
    s3: S3Images = field(default_factory=S3Images)
    folder: Path | None = None
    agents: list[subprocess.Popen] = field(default_factory=list)


class Setup(NamedTuple):
    variant: str
    placement: str
    input: str
    zero_stage: str = ""  # deepspeed's: one stage, or "" for a sweep of all three (on one host)

    @property
    def name(self) -> str:
        return "-".join([self.variant, self.placement, self.input]
                        + ([f"zero{self.zero_stage}"] if self.zero_stage else [])).replace(" ", "-")


def start(soak: Soak, folder: Path, setup: Setup, port: int, *extra: str) -> list[subprocess.Popen]:
    """The sweep's processes: one harness on this host, or an agent on each namespace host (node 1's folder:
    FOLDER/node1). `bench sweep` runs on one host: across hosts, the sweep of one run is a `bench run` on each."""
    reading, env = [], {}
    if setup.input == "files":
        reading = ["--input", "files", "--data-dir", str(soak.images), "--loader-workers", "1"]
    elif setup.input == "s3":
        reading, env = ["--input", "s3", "--data-url", S3Images.URL, "--loader-workers", "1"], soak.s3.ready().env()
    stage = ["--zero-stage", setup.zero_stage] if setup.zero_stage else []
    options = ["--task", "quick", "--epochs", str(EPOCHS[setup.input]), "--devices", "2",
               "--timeout", str(soak.timeout_s), *reading, *stage, *extra]
    output = dict(cwd=REPO_ROOT, env={**os.environ, **CPU, **env}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                  text=True)
    if setup.placement == "two hosts":
        return netns.bench_on_hosts(soak.hosts, port, folder, "run", "--variant", setup.variant, *options, **output)
    nodes = "1" if setup.placement == "one node" else "2"
    return [subprocess.Popen([sys.executable, "-m", "bench", "sweep", "--variants", setup.variant, "--no-analysis",
                              "--nodes", nodes, *options, "--out", str(folder)], **output)]


def run_ids(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.glob("runs/*")) + sorted(p.name for p in folder.glob("node1/runs/*"))


def role(process: psutil.Process, agents: list[int]) -> str | None:
    """What a process of the run is, by its command line."""
    try:
        command = " ".join(process.cmdline())
    except psutil.Error:
        return None
    if process.pid in agents:
        return "harness" if process.pid == agents[0] else "node agent"
    if "multiprocessing.forkserver" in command:  # a rank's loader workers fork from its forkserver
        with contextlib.suppress(psutil.Error):
            parent = process.parent()
            return "loader worker" if parent is not None and parent.cmdline() == process.cmdline() else "forkserver"
        return None
    if "multiprocessing.resource_tracker" in command:  # the forkserver's: no target either
        return "resource tracker"
    if "bench.run.reaper" in command:
        return "watchdog"
    if "bench.hosts.rendezvous" in command:
        return "store"
    if any(launcher in command for launcher in LAUNCHERS):  # before the ranks: its command line names theirs
        return "launcher"
    if "--spec" in command and ("_impl" in command or "probes." in command):
        return "rank"
    if command.startswith("ip netns exec"):
        return None  # `ip` has exec'd into the agent: the same process
    return "launcher"


def processes(folder: Path, agents: list[int]) -> list[psutil.Process]:
    """Every live process of the trial's sweep: the agents and what descends from them, whatever carries one of its
    run ids in its environment (the run's own processes, those of a session of their own too) or on its command
    line (the watchdog), and whatever names its folder."""
    found: dict[int, psutil.Process] = {}
    for pid in agents:
        with contextlib.suppress(psutil.Error):
            agent = psutil.Process(pid)
            for p in [agent, *agent.children(recursive=True)]:
                found[p.pid] = p
    ids = run_ids(folder)
    for run_id in ids:
        for pid in processes_of_run(run_id):
            with contextlib.suppress(psutil.Error):
                found[pid] = psutil.Process(pid)
    for p in psutil.process_iter(["cmdline"]):
        command = " ".join(p.info["cmdline"] or [])
        if p.pid != os.getpid() and (str(folder) in command or any(i in command for i in ids)):
            found[p.pid] = p
    return [p for p in found.values() if alive(p)]


def alive(process: psutil.Process) -> bool:
    try:
        return process.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def left_of(folder: Path, hosts, within_s: float = 15) -> list[str]:
    """The trial's processes still alive after up to `within_s` (the watchdog's deadline), as 'pid command'; across
    hosts, any process inside one."""
    deadline = time.monotonic() + within_s
    while True:
        found = {p.pid: p for p in processes(folder, [])}
        for host in hosts or ():
            for pid in host.pids():
                with contextlib.suppress(psutil.Error):
                    found[pid] = psutil.Process(pid)
        described = []
        for p in found.values():
            with contextlib.suppress(psutil.Error):
                if alive(p):
                    described.append(f"{p.pid} {' '.join(p.cmdline())[:120]}")
        if not described or time.monotonic() > deadline:
            return described
        time.sleep(0.3)


def torn_lines(path: Path) -> int:
    if not path.exists():
        return 0
    torn = 0
    for line in path.read_text(errors="replace").splitlines():
        try:
            torn += line.strip() != "" and not isinstance(json.loads(line), dict)
        except json.JSONDecodeError:
            torn += 1
    return torn


def rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def planned(row: dict) -> tuple:
    """The planned run a row is of: a sweep of deepspeed plans one run per ZeRO stage."""
    return row["variant"], (row.get("task") or {}).get("zero_stage"), row["nodes"], row["world_size"]


def ended(process: subprocess.Popen, within_s: float, what: str) -> str:
    """Its stderr once it has ended; killed if it has not within `within_s` (which the stderr then says)."""
    try:
        return process.communicate(timeout=within_s)[1] or ""
    except subprocess.TimeoutExpired:
        process.kill()
        try:
            err = process.communicate(timeout=10)[1] or ""
        except subprocess.TimeoutExpired:  # ended, but a process it left holds its stderr open
            err = ""
        return err + f"\nsoak: {what} did not end within {within_s:.0f} s and was killed"


def all_ended(agents: list[subprocess.Popen], within_s: float, what: str) -> str:
    return "\n".join(ended(agent, within_s, what) for agent in agents)


def reference(soak: Soak, setup: Setup) -> dict[tuple, dict]:
    """An undisturbed sweep of the configuration: the figures a resumed sweep must reproduce, by planned run. Drivers
    that share a references folder train each setup's once: the second waits for the first's."""
    folder = (soak.references or soak.out / "reference") / setup.name
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.with_name(folder.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (folder / "console.log").exists():  # written once the sweep has ended: a stopped one is redone
            shutil.rmtree(folder, ignore_errors=True)
            soak.agents, soak.folder = start(soak, folder, setup, PORTS - 1), folder  # what a stop signal stops
            err = all_ended(soak.agents, soak.timeout_s * 4, "the undisturbed sweep")
            soak.agents = []
            (folder / "console.log").parent.mkdir(parents=True, exist_ok=True)
            (folder / "console.log").write_text(err)
        found = rows(folder / "results.jsonl")
        ok = {planned(r): r for r in found if r["status"] == "ok"}
        if not ok or len(ok) < len({planned(r) for r in found}):
            # A reference short of a planned run would make every later trial of the setup fail as unplanned: it
            # is kept aside for the finding, and the next driver trains it again.
            failed = folder.with_name(f"{folder.name}.failed-{time.strftime('%Y%m%dT%H%M%S')}")
            folder.rename(failed)
            raise SystemExit(f"the undisturbed sweep of {setup} left a planned run without an ok row: see {failed}")
    return ok


@contextlib.contextmanager
def small_disk(folder: Path, wanted: bool):
    """The trial's folder on a tmpfs of its own where a full disk is the fault; its files are copied out before the
    tmpfs goes."""
    folder.mkdir(parents=True)
    if not wanted:
        yield
        return
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={DISK}", "tmpfs", str(folder)], check=True)
    try:
        yield
    finally:
        kept = folder.with_name(folder.name + ".tmpfs")
        shutil.copytree(folder, kept, ignore=shutil.ignore_patterns(".filler"))
        subprocess.run(["umount", "--lazy", str(folder)], check=True)
        folder.rmdir()
        kept.rename(folder)


def fill(folder: Path) -> bool:
    """Write to the folder's disk until it is full."""
    try:
        with open(folder / ".filler", "wb") as f:
            while True:
                f.write(b"\0" * (1 << 20))
                f.flush()
    except OSError:
        return True


def listening(pids: set[int], host) -> dict[int, int]:
    """The TCP ports a process of `pids` listens on, in `host`'s network (this host's where None): port -> pid."""
    shown = subprocess.run([*(host.command() if host else []), "ss", "-tlnpH"], capture_output=True, text=True).stdout
    ports = {}
    for line in shown.splitlines():
        fields = line.split()
        if len(fields) >= 6 and (pid := re.search(r"pid=(\d+)", fields[5])) and int(pid[1]) in pids:
            ports[int(fields[3].rsplit(":", 1)[1])] = int(pid[1])
    return ports


def close_port(port: int, hosts) -> None:
    """Close `port`'s listener and every connection to or from it (`ss -K`), on each host of the run. On this host
    a connection to it is closed only where it is to loopback, as the run's are: a port of the same number elsewhere
    is none of the run's. The port is one the run listens on, so no other process's socket has it as its own."""
    for host in hosts or (None,):
        to_it = f"dport = :{port}" + ("" if host else " and ( dst 127.0.0.0/8 or dst [::ffff:127.0.0.1] or dst [::1] )")
        subprocess.run([*(host.command() if host else []), "ss", "-K", "-t", "-a",
                        f"( sport = :{port} ) or ( {to_it} )"], capture_output=True)


def hit(soak: Soak, setup: Setup, hosts, drawn: str, fault: str, rng: random.Random) -> tuple[str | None, int | None]:
    """The fault on a process of the drawn kind, waited for up to 3 s (a target not started yet is hit when it
    starts); where the run has none such, on one of the kinds it has. A closed port is one a process of the drawn
    kind listens on. Returns the kind hit (None if the sweep ended first) and the port closed."""
    agents, pids = soak.agents, [a.pid for a in soak.agents]
    waited_until = time.monotonic() + 3
    while any(a.poll() is None for a in agents):
        kinds: dict[str, list[int]] = collections.defaultdict(list)
        for p in processes(soak.folder, pids):
            if (kind := role(p, pids)) is not None:
                kinds[kind].append(p.pid)
        if setup.input == "s3" and fault != "closed port":
            kinds["S3 server"].append(soak.s3.server.process.pid)
        if fault == "closed port":
            owners = {pid: kind for kind, of_kind in kinds.items() for pid in of_kind}
            ports = {port: owners[pid] for host in hosts or (None,)
                     for port, pid in listening(set(owners), host).items()}
            kinds = collections.defaultdict(list)
            for port, kind in ports.items():
                kinds[kind].append(port)
        if kinds and (drawn in kinds or time.monotonic() > waited_until):
            target = drawn if drawn in kinds else rng.choice(sorted(kinds))
            chosen = rng.choice(sorted(kinds[target]))
            if fault == "closed port":
                close_port(chosen, hosts)
                return target, chosen
            try:
                os.kill(chosen, getattr(signal, fault))
            except ProcessLookupError:
                continue
            if fault == "SIGSTOP" and target in ("harness", "node agent"):
                time.sleep(soak.timeout_s + 5)  # paused past its run's timeout, then let go
                for pid in kinds[target]:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGCONT)
            return target, None
        time.sleep(0.1)
    return None, None


def gone(folder: Path, left: list[str]) -> None:
    """Whatever a check found left, killed before the next trial (a stopped process too)."""
    for run_id in run_ids(folder):
        kill_all_of_run(run_id)
    for line in left:
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(line.split()[0]), signal.SIGKILL)


def resume(soak: Soak, setup: Setup, port: int, expected: dict) -> list[subprocess.Popen]:
    """`sweep --resume`; across hosts, the run again where it has no ok row."""
    if setup.placement != "two hosts":
        return start(soak, soak.folder, setup, port, "--resume")
    done = {planned(r) for r in rows(soak.folder / "results.jsonl") if r["status"] == "ok"}
    return [] if set(expected) <= done else start(soak, soak.folder, setup, port)


def stop_trial(soak: Soak) -> None:
    for agent in soak.agents:
        with contextlib.suppress(ProcessLookupError):
            os.kill(agent.pid, signal.SIGCONT)
            agent.send_signal(signal.SIGINT)  # the sweep records its run as interrupted and cleans it up
    with contextlib.suppress(Exception):
        all_ended(soak.agents, 60, "the interrupted sweep")
    if soak.folder:
        for run_id in run_ids(soak.folder):
            kill_all_of_run(run_id)


def trial(soak: Soak, number: int, rng: random.Random) -> dict:
    """One sweep, one fault."""
    placement = rng.choice(PLACEMENTS if soak.hosts else PLACEMENTS[:2])
    variant = rng.choice(ACROSS_HOSTS if placement == "two hosts" else APPROACHES)
    source = rng.choice([i for i in soak.inputs if not (i == "s3" and placement == "two hosts")])
    targets = (TARGETS + (("node agent",) if placement == "two hosts" else ())
               + (("loader worker",) if source != "memory" else ()) + (("S3 server",) if source == "s3" else ()))
    faults = FAULTS if soak.hosts else tuple(f for f in FAULTS if f != "full disk")
    drawn, fault, moment = rng.choice(targets), rng.choice(faults), round(rng.uniform(0.5, 8.0), 2)
    # One ZeRO stage a trial, or now and then a sweep of the three (its later runs not started when the fault
    # lands); across hosts a run is of one stage.
    stage = rng.choice(("1", "2", "3") + (("",) if placement != "two hosts" else ())) if variant == "deepspeed" else ""
    setup = Setup(variant, placement, source, stage)
    hosts = soak.hosts if placement == "two hosts" else None
    expected = reference(soak, setup)
    folder = soak.folder = soak.out / "trials" / f"{number:04d}"
    shutil.rmtree(folder, ignore_errors=True)
    began, port, closed = time.monotonic(), PORTS + number % 1000, None
    with small_disk(folder, fault == "full disk"):
        agents = soak.agents = start(soak, folder, setup, port)
        time.sleep(moment)
        if fault == "full disk":
            target = "results folder" if any(a.poll() is None for a in agents) and fill(folder) else None
        else:
            target, closed = hit(soak, setup, hosts, drawn, fault, rng)
        err = all_ended(agents, soak.timeout_s * 4 + 30, "the sweep")  # deepspeed: 3 runs
        left = left_of(folder, hosts)
        gone(folder, left)
        (folder / ".filler").unlink(missing_ok=True)
        store = folder / "results.jsonl"
        before = rows(store) if not torn_lines(store) else []
        resumed = soak.agents = resume(soak, setup, port + 1000, expected)
        resume_err = all_ended(resumed, soak.timeout_s * 4 + 30, "the resumed sweep")
        left += left_of(folder, hosts)
        gone(folder, left)
        soak.agents = []
        (folder / "console.log").write_text(f"{err}\n--- the resume:\n{resume_err}")  # kept where the trial fails
    after = rows(store) if not torn_lines(store) else []
    ok_after = collections.Counter(planned(r) for r in after if r["status"] == "ok")
    last_ok = {planned(r): r for r in after if r["status"] == "ok"}
    matched = all(ok_after[k] == 1 and all(last_ok[k][f] == e[f] for f in ("test_loss", "test_accuracy"))
                  for k, e in expected.items())
    per_run = collections.Counter(planned(r) for r in before)
    return {"trial": number, "placement": placement, "variant": variant, "zero_stage": stage, "input": source,
            "nodes": 1 if placement == "one node" else 2,
            "drawn": drawn if fault != "full disk" else "results folder", "target": target, "fault": fault,
            "port": closed, "moment_s": moment, "injected": target is not None,
            "harness_exit": [a.returncode for a in agents],
            "planned_runs": len(expected), "rows_before_resume": len(before),
            "statuses": [r["status"] for r in before],
            "runs_with_several_rows": sum(c > 1 for c in per_run.values()),
            "unplanned_rows": sum(k not in expected for k in per_run),
            "unexplained": [r["run_id"] for r in before if r["status"] != "ok" and not r.get("error")],
            "lost": [r["run_id"] for r in before if r["run_id"] not in {a["run_id"] for a in after}],
            "left": left, "torn": torn_lines(store), "resume_exit": [a.returncode for a in resumed],
            "planned_runs_with_one_ok_row": sum(ok_after[k] == 1 for k in expected), "resume_matched": matched,
            "traceback": printed_traceback(err + resume_err), "hung": "and was killed" in err + resume_err,
            "seconds": round(time.monotonic() - began, 1)}


def printed_traceback(console: str) -> bool:
    """A Python traceback printed on the console (a rank's, quoted inside a printed row, is the row's reason)."""
    return any(line.startswith("Traceback (most recent call last)") for line in console.splitlines())


def failed(t: dict) -> bool:
    return bool(t["left"] or t["torn"] or t["unexplained"] or t["lost"] or t["runs_with_several_rows"]
                or t["unplanned_rows"] or not t["resume_matched"] or any(t["resume_exit"]) or t["traceback"]
                or t["hung"])


def summary(lines: list[dict], seed: int, command: str) -> str:
    injected = [t for t in lines if t["injected"]]
    by_kind = collections.Counter((t["fault"], t["target"]) for t in injected)
    by_placement = collections.Counter(t["placement"] for t in injected)
    by_input = collections.Counter(t.get("input", "memory") for t in injected)
    failures = [t for t in lines if failed(t)]
    planned_runs = sum(t["planned_runs"] for t in lines)
    table = "\n".join(f"| {fault} | {target} | {count} |" for (fault, target), count in sorted(by_kind.items()))
    return (f"# Soak of random faults\n\n`{command}` (seed {seed})\n\n"
            f"- trials: {len(lines)}; a fault injected in {len(injected)} "
            f"({', '.join(f'{n} {p}' for p, n in sorted(by_placement.items()))}; reading from "
            f"{', '.join(f'{n} {i}' for i, n in sorted(by_input.items()))}); in the others the sweep had ended "
            "before its moment\n"
            f"- processes left after a trial: {sum(len(t['left']) for t in lines)}\n"
            f"- torn store lines: {sum(t['torn'] for t in lines)}\n"
            f"- rows lost by the resume: {sum(len(t['lost']) for t in lines)}\n"
            f"- rows without a reason: {sum(len(t['unexplained']) for t in lines)}\n"
            f"- planned runs with more than one row before the resume: "
            f"{sum(t['runs_with_several_rows'] for t in lines)}\n"
            f"- planned runs with exactly one ok row after the resume: "
            f"{sum(t['planned_runs_with_one_ok_row'] for t in lines)} of {planned_runs}\n"
            f"- resumed sweeps whose runs all have the undisturbed test loss and accuracy, to the bit: "
            f"{sum(t['resume_matched'] for t in lines)} of {len(lines)}\n"
            f"- resumes that did not exit 0: {sum(any(t['resume_exit']) for t in lines)}\n"
            f"- tracebacks on the console: {sum(t['traceback'] for t in lines)}\n"
            f"- a sweep that did not end by itself: {sum(bool(t['hung']) for t in lines)}\n"
            f"- trials with any of these wrong: {len(failures)}"
            + (f" ({', '.join(str(t['trial']) for t in failures)}: see trials.jsonl)" if failures else "") + "\n\n"
            "| fault | target | injected |\n|---|---|---|\n" + table + "\n")


def images(out: Path) -> Path:
    """The quick task's images, exported once as an image folder: what the trials with `--input files` read."""
    folder = out / "images"
    if not (folder / "test").exists():
        shutil.rmtree(folder, ignore_errors=True)
        subprocess.run([sys.executable, "-m", "bench", "data", "export-images", "--task", "quick", str(folder)],
                       cwd=REPO_ROOT, check=True, capture_output=True)
    return folder


def interrupted(signum, frame) -> None:
    raise KeyboardInterrupt


def build_deepspeed_op() -> None:
    """DeepSpeed's CPU op, built before the first trial: a build (minutes beside another driver, and again once the
    VM lands on another kind of CPU) would otherwise time out whichever run starts it, undisturbed ones included."""
    if importlib.util.find_spec("deepspeed") is None:
        return
    subprocess.run([sys.executable, "-c", "from deepspeed.comm.torch import build_shm_op; build_shm_op()"],
                   env={**os.environ, "DS_ACCELERATOR": "cpu", "CUDA_VISIBLE_DEVICES": ""}, check=True,
                   capture_output=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python benchmarks/soak.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", type=Path, default=Path("results/soak-cpu"))
    parser.add_argument("--references", type=Path,
                        help="the undisturbed sweeps' folder (default OUT/reference): drivers run at once on one "
                             "machine and one commit share one, and train each setup's once")
    parser.add_argument("--inputs", default=",".join(INPUTS),
                        help=f"the inputs drawn from, as often as each is named (default {','.join(INPUTS)}); "
                             "the two hosts draw among those but s3")
    parser.add_argument("--timeout", type=int, default=TIMEOUT_S,
                        help=f"each run's --timeout, which a stopped process is held past (default {TIMEOUT_S}; longer "
                             "where other work shares the machine: deepspeed's runs took 29 s beside a second soak)")
    args = parser.parse_args(argv)
    inputs = tuple(args.inputs.split(","))
    if not set(inputs) <= set(INPUTS) or set(inputs) == {"s3"}:
        parser.error(f"--inputs takes memory, files and s3, and memory or files among them; not {args.inputs}")
    if why := netns.why_no_namespaces():
        print(f"soak: no namespace hosts here ({why}): their trials and the full disk's are left out",
              file=sys.stderr)
    for stop in (signal.SIGINT, signal.SIGTERM):  # SIGINT too: a background job starts with it ignored
        signal.signal(stop, interrupted)
    args.out.mkdir(parents=True, exist_ok=True)
    build_deepspeed_op()
    record = args.out / "trials.jsonl"
    lines = rows(record)
    two_hosts = netns.two_hosts(subnet=93) if not why else contextlib.nullcontext()
    soak = None
    try:
        with two_hosts as hosts:
            soak = Soak(args.out, args.timeout, hosts, images(args.out), args.references, inputs)
            for number in range(len(lines), args.trials):  # each trial draws from its own seed: a rerun goes on
                line = trial(soak, number, random.Random(f"{args.seed}-{number}"))
                with record.open("a") as f:
                    f.write(json.dumps(line) + "\n")
                lines.append(line)
                print(json.dumps(line), flush=True)
                if not failed(line):  # a failure's folder is kept for its reproduction
                    shutil.rmtree(args.out / "trials" / f"{number:04d}", ignore_errors=True)
    except KeyboardInterrupt:
        if soak:
            stop_trial(soak)
        print(f"soak: interrupted; {len(lines)} trials in {record}", file=sys.stderr)
        return 130
    finally:
        if soak:
            soak.s3.stop()
    command = "python benchmarks/soak.py " + " ".join(argv if argv is not None else sys.argv[1:])
    (args.out / "summary.md").write_text(summary(lines, args.seed, command))
    print((args.out / "summary.md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
