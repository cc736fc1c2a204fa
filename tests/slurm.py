"""A real Slurm cluster for the tests, on namespace hosts (bench/studies/netns.py): Debian's munged (one, its socket on
the shared file system), slurmctld on the first host, one slurmd per host under its own NodeName and NodeAddr.
No systemd: the fixture starts every daemon in the foreground itself, with a slurm.conf of its own
(SLURM_CONF), and stops them all whatever the test's outcome. `make test` installs the packages when missing."""
from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from bench.studies.netns import Host

DAEMONS = {"munged": "/usr/sbin/munged", "slurmctld": "/usr/sbin/slurmctld", "slurmd": "/usr/sbin/slurmd",
           "sbatch": "/usr/bin/sbatch"}
PARTITION = "dtb"


def why_no_slurm() -> str | None:
    """None where Slurm and munge are installed, else why not (the test's skip reason)."""
    missing = [name for name, path in DAEMONS.items() if not os.access(path, os.X_OK)]
    if missing:
        return (f"Slurm or munge is not installed ({', '.join(missing)} missing): `make test` installs Debian's "
                "slurmctld, slurmd, slurm-client and munge where apt-get runs as root")
    return None


@dataclass(frozen=True)
class Cluster:
    conf: Path
    hosts: tuple[Host, ...]
    daemons: tuple[int, ...]  # what the hosts run before any job: slurmctld (and its slurmscriptd), the slurmds

    def command(self, *argv: str) -> list[str]:
        """A Slurm client command, run on the first host (the only one that reaches slurmctld)."""
        return self.hosts[0].command("env", f"SLURM_CONF={self.conf}", *argv)

    def run(self, *argv: str, timeout: float = 30) -> str:
        return subprocess.run(self.command(*argv), check=True, capture_output=True, text=True,
                              timeout=timeout).stdout

    def job_state(self, job_id: str) -> str:
        """PENDING, RUNNING, COMPLETED, CANCELLED, FAILED... (`scontrol` while slurmctld keeps the job)."""
        out = self.run("scontrol", "show", "job", job_id, "-o")
        return next(f.split("=", 1)[1] for f in out.split() if f.startswith("JobState="))

    def job_processes(self, settle_s: float) -> list[int]:
        """Whatever runs on the hosts besides the daemons once `settle_s` has passed or nothing is left (a job's
        slurmstepd takes a moment to exit after its job ended)."""
        deadline = time.monotonic() + settle_s
        while (left := [p for h in self.hosts for p in h.pids() if p not in self.daemons]) and time.monotonic() < deadline:
            time.sleep(0.5)
        return left

    def wait_for(self, job_id: str, states: set[str], timeout_s: float) -> str:
        deadline = time.monotonic() + timeout_s
        while (state := self.job_state(job_id)) not in states and time.monotonic() < deadline:
            time.sleep(1)
        return state


def _conf(workdir: Path, hosts: tuple[Host, ...], munge_socket: Path) -> str:
    names = ",".join(f"h{i}" for i in range(len(hosts)))
    nodes = "\n".join(f"NodeName=h{i} NodeAddr={h.address} NodeHostname=h{i} CPUs=1 State=UNKNOWN"
                      for i, h in enumerate(hosts))
    return f"""ClusterName=dtbench
SlurmctldHost=h0({hosts[0].address})
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={munge_socket}
SlurmUser=root
SlurmdUser=root
StateSaveLocation={workdir}/ctld
SlurmdSpoolDir={workdir}/%n
SlurmctldPidFile={workdir}/slurmctld.pid
SlurmdPidFile={workdir}/%n.pid
SlurmctldLogFile={workdir}/slurmctld.log
SlurmdLogFile={workdir}/%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SelectType=select/linear
SchedulerType=sched/builtin
MpiDefault=none
ReturnToService=2
SlurmdParameters=config_overrides
KillWait=10
{nodes}
PartitionName={PARTITION} Nodes={names} Default=YES MaxTime=INFINITE State=UP
"""


def _on(host: Host, hostname: str, *argv: str) -> list[str]:
    """`argv` as a daemon of `host`: in its network namespace, under a host name of its own. Not `ip netns exec`,
    which mounts a sysfs of its own without the cgroup file system slurmd needs."""
    return ["nsenter", f"--net=/run/netns/{host.namespace}", "unshare", "--uts", "sh", "-c",
            f'hostname {hostname} && exec "$@"', "sh", *argv]


def _stop(process: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError):
        process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@contextlib.contextmanager
def slurm_cluster(hosts: tuple[Host, ...], workdir: Path):
    """Slurm on `hosts` (each a node h0, h1, ...), up and idle; yields a Cluster. Everything it started is
    stopped, and its state left in `workdir`, on the way out."""
    workdir.mkdir(parents=True, exist_ok=True)
    key, socket_path = workdir / "munge.key", workdir / "munge.socket"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o400)
    conf = workdir / "slurm.conf"
    conf.write_text(_conf(workdir, hosts, socket_path))
    (workdir / "ctld").mkdir(exist_ok=True)
    env = {**os.environ, "SLURM_CONF": str(conf)}
    daemons: list[subprocess.Popen] = []
    try:
        daemons.append(subprocess.Popen(
            [DAEMONS["munged"], "--foreground", "--force", f"--key-file={key}", f"--socket={socket_path}",
             f"--pid-file={workdir}/munged.pid", f"--seed-file={workdir}/munged.seed",
             f"--log-file={workdir}/munged.log"], stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT))
        daemons.append(subprocess.Popen(_on(hosts[0], "h0", DAEMONS["slurmctld"], "-D", "-i", "-f", str(conf)),
                                        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT))
        for i, host in enumerate(hosts):
            (workdir / f"h{i}").mkdir(exist_ok=True)
            daemons.append(subprocess.Popen(_on(host, f"h{i}", DAEMONS["slurmd"], "-D", "-N", f"h{i}", "-f", str(conf)),
                                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT))
        _wait_until_idle(conf, hosts, workdir)
        yield Cluster(conf, hosts, tuple(pid for host in hosts for pid in host.pids()))
    finally:
        for daemon in reversed(daemons):
            _stop(daemon)


def _wait_until_idle(conf: Path, hosts: tuple[Host, ...], workdir: Path, timeout_s: float = 60) -> None:
    deadline, states, nodes = time.monotonic() + timeout_s, "", len(hosts)
    while time.monotonic() < deadline:
        with contextlib.suppress(subprocess.SubprocessError):
            states = Cluster(conf, hosts, ()).run("sinfo", "--noheader", "--Node", "--format=%N %t", timeout=10)
            if sum(line.split()[1] == "idle" for line in states.splitlines()) == nodes:
                return
        time.sleep(0.5)
    logs = {name: (workdir / name).read_text()[-800:] for name in ("slurmctld.log", "h0.log")
            if (workdir / name).exists()}
    raise RuntimeError(f"Slurm's nodes never became idle: sinfo says {states!r}; logs: {logs}")

