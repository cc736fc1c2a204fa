"""Which network interface a multi-host run's collectives use.

gloo (and NCCL's bootstrap) pick an address from the host name unless told an interface, and a host name
often resolves to loopback (Debian's 127.0.1.1): every host would then offer its peers 127.0.0.1. A node
agent therefore names the interface its route to the master leaves by (`GLOO_SOCKET_IFNAME`,
`NCCL_SOCKET_IFNAME`), or the one `--ifname` gives, and the row records it.
"""
from __future__ import annotations

import socket
from dataclasses import dataclass

import psutil

from bench.spec.task import SpecError


@dataclass(frozen=True)
class Interface:
    name: str
    address: str  # this host's address on it: what its peers connect to


def addresses() -> dict[str, list[str]]:
    """Every interface of this host (its network namespace) with its IPv4 addresses."""
    return {name: [a.address for a in found if a.family == socket.AF_INET]
            for name, found in psutil.net_if_addrs().items()}


def toward(master_addr: str, port: int) -> Interface:
    """The interface the kernel's route to the master leaves by, and this host's address on it."""
    try:
        master = socket.getaddrinfo(master_addr, port, socket.AF_INET, socket.SOCK_DGRAM)[0][4][0]
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:  # connect() on UDP only routes
            probe.connect((master, port))
            local = probe.getsockname()[0]
    except OSError as exc:
        raise SpecError(f"--master-addr {master_addr}: no route from this host ({exc.strerror or exc}): "
                        "pass node 0's address as this host reaches it") from exc
    for name, found in addresses().items():
        if local in found:
            return Interface(name, local)
    raise SpecError(f"--master-addr {master_addr}: the route leaves by {local}, which no interface holds: "
                    "pass --ifname")


def named(name: str) -> Interface:
    found = addresses()
    if not found.get(name):
        raise SpecError(f"--ifname {name}: no such interface with an IPv4 address on this host (it has "
                        f"{', '.join(n for n, a in found.items() if a) or 'none'})")
    return Interface(name, found[name][0])
