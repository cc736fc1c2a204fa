"""Hosts with their own network on one machine, for the tests and the studies that need several hosts: Linux
network namespaces joined by a veth pair, each with its own address in a private range and loopback up, the link
shaped to a rate with `tc`'s token bucket where asked (netem is not on every kernel). Only these namespaces are ever
addressed, and they are deleted (their processes killed first, their qdiscs with them) whatever the outcome; a
namespace left by a process killed outright is deleted by the next `two_hosts` (`remove_stale`)."""
from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Host:
    namespace: str
    interface: str
    address: str

    def command(self, *argv: str) -> list[str]:
        """`argv` run inside this host's network namespace."""
        return ["ip", "netns", "exec", self.namespace, *argv]

    def pids(self) -> list[int]:
        out = subprocess.run(["ip", "netns", "pids", self.namespace], capture_output=True, text=True)
        return [int(p) for p in out.stdout.split()]


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True)


def why_no_namespaces() -> str | None:
    """None where this machine can make network namespaces, else why not (the test's skip reason)."""
    if shutil.which("ip") is None:
        return "no `ip` command (iproute2) on this machine"
    if os.geteuid() != 0:
        return "network namespaces need root"
    probe = f"dtbprobe{os.getpid()}"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if made.returncode != 0:
        return f"`ip netns add` failed here: {made.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


PREFIX = "dtb"


def remove_stale() -> list[str]:
    """Delete the namespaces this module made for a process that no longer runs (one killed before its clean-up
    could run); return their names."""
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split("\n")
    stale = []
    for name in (line.split()[0] for line in listed if line.strip()):
        pid = name[len(PREFIX):-2]
        if not (name.startswith(PREFIX) and pid.isdigit() and name[-2:] in ("h0", "h1")):
            continue
        if not os.path.exists(f"/proc/{pid}"):
            _delete(Host(name, "", ""))
            stale.append(name)
    return stale


def _delete(host: Host) -> None:
    for _ in range(20):  # again, for a child forked while the others were killed
        pids = host.pids()
        if not pids:
            break
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.05)
    subprocess.run(["ip", "netns", "del", host.namespace], capture_output=True)  # takes its veth end along
    if host.interface:  # a veth still in this namespace: setup failed before moving it
        subprocess.run(["ip", "link", "del", host.interface], capture_output=True)


def shape(host: Host, rate: str | None) -> None:
    """Limit what `host` sends over its veth to `rate` (tc's units: 50mbit, 1gbit) with a token bucket; None:
    unshaped. Replaces whatever shaping was there."""
    if rate is None:
        subprocess.run(host.command("tc", "qdisc", "del", "dev", host.interface, "root"), capture_output=True)
        return
    # A bucket of a few packets: a deeper one lets every burst after an idle moment through at the veth's own
    # speed, as no link of that rate would (a 10 ms bucket let half of each step's all-reduce through at once).
    burst = max(8 * 1024, int(bits_per_s(rate) / 8 * 50e-6))
    subprocess.run(host.command("tc", "qdisc", "replace", "dev", host.interface, "root", "tbf", "rate", rate,
                                "burst", str(burst), "latency", "100ms"), check=True, capture_output=True, text=True)


def bits_per_s(rate: str) -> float:
    """tc's rate units (bit, kbit, mbit, gbit), decimal as tc reads them."""
    units = {"gbit": 1e9, "mbit": 1e6, "kbit": 1e3, "bit": 1.0}
    for unit, scale in units.items():
        if rate.lower().endswith(unit) and rate[:-len(unit)].replace(".", "", 1).isdigit():
            return float(rate[:-len(unit)]) * scale
    raise ValueError(f"rate {rate!r}: give it as tc does, e.g. 50mbit or 1gbit")


@contextlib.contextmanager
def two_hosts(subnet: int = 77):
    """Two namespace hosts, 10.233.<subnet>.1 and .2 on a veth pair; yields (host0, host1)."""
    remove_stale()
    tag = f"{PREFIX}{os.getpid()}"
    hosts = (Host(f"{tag}h0", f"{tag}v0", f"10.233.{subnet}.1"), Host(f"{tag}h1", f"{tag}v1", f"10.233.{subnet}.2"))
    try:
        for host in hosts:
            _ip("netns", "add", host.namespace)
            _ip("-n", host.namespace, "link", "set", "lo", "up")
        _ip("link", "add", hosts[0].interface, "type", "veth", "peer", "name", hosts[1].interface)
        for host in hosts:
            _ip("link", "set", host.interface, "netns", host.namespace)
            _ip("-n", host.namespace, "addr", "add", f"{host.address}/24", "dev", host.interface)
            _ip("-n", host.namespace, "link", "set", host.interface, "up")
        yield hosts
    finally:
        for host in hosts:
            _delete(host)


def bench_on_hosts(hosts, port: int | str, out: Path, *argv: str, **popen) -> list[subprocess.Popen]:
    """`python -m bench ARGV` as one node of a two-node run on each host (node 0's results in `out`, node 1's in
    `out/node1`), started, with `popen`'s options. Each host's agent gets a core of its own, as the one-host run's
    two ranks have: namespaces share the machine's cores, and each agent would otherwise pin its rank to the first."""
    cores = sorted(os.sched_getaffinity(0))
    return [subprocess.Popen(host.command(sys.executable, "-m", "bench", *argv, "--nnodes", "2",
                                          "--node-rank", str(rank), "--master-addr", hosts[0].address,
                                          "--master-port", str(port), "--out", str(out if rank == 0 else out / "node1")),
                             preexec_fn=lambda core=cores[rank % len(cores)]: os.sched_setaffinity(0, {core}), **popen)
            for rank, host in enumerate(hosts)]
