"""Sockets and environment that keep a run's listeners on 127.0.0.1. Standard library only."""
from __future__ import annotations

import socket

# gloo and nccl bootstrap over loopback when every rank is on this host.
LOOPBACK_ENV = {"GLOO_SOCKET_IFNAME": "lo", "NCCL_SOCKET_IFNAME": "lo"}


def loopback_listener() -> socket.socket:
    """A socket listening on 127.0.0.1 at a port the OS picks; clients that come early wait in its backlog."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    return sock


def free_port() -> int:
    """A port free on loopback right now (the OS picks it, so concurrent sweeps don't collide)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def loopback_store_env(port: int) -> dict[str, str]:
    """torchrun's agents join the run's store at 127.0.0.1:port as clients;
    gloo and nccl bootstrap on loopback. See torch_impl/store.py."""
    return {"TORCHELASTIC_USE_AGENT_STORE": "True", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
            **LOOPBACK_ENV}
