"""Hosts with their own network for the tests: Linux network namespaces joined by a veth pair, each with
its own address in a private range and loopback up. Only these namespaces are ever addressed, and they
are deleted (their processes killed first) whatever the test's outcome."""
from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
from dataclasses import dataclass


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


@contextlib.contextmanager
def two_hosts(subnet: int = 77):
    """Two namespace hosts, 10.233.<subnet>.1 and .2 on a veth pair; yields (host0, host1)."""
    tag = f"dtb{os.getpid() % 100000}"
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
            for pid in host.pids():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            subprocess.run(["ip", "netns", "del", host.namespace], capture_output=True)  # takes its veth end along
