"""A run's rendezvous store, listening on loopback only.

torch's TCPStore listens on every interface even when its address is 127.0.0.1. For runs whose nodes
are all on this host, the store is created on a socket we bind to 127.0.0.1 (`master_listen_fd`), and
torchrun's agents are told (TORCHELASTIC_USE_AGENT_STORE with the same MASTER_ADDR/MASTER_PORT) to
join it as clients: when its own bind then fails, torch's TCPStore connects instead of failing.

`python -m bench.hosts.rendezvous --fd N` serves the store on an inherited, already bound socket until killed.
"""
from __future__ import annotations

import contextlib
import os
import signal
import socket
from dataclasses import dataclass, field
from datetime import timedelta

from bench.hosts.loopback import loopback_listener, loopback_store_env
from bench.spec.setting import parse, setting


def serve(fd: int):
    import torch.distributed as dist

    with socket.socket(fileno=os.dup(fd)) as probe:  # a socket object closes its fd when collected
        port = probe.getsockname()[1]
    return dist.TCPStore("127.0.0.1", port, is_master=True, master_listen_fd=fd, use_libuv=True,
                         wait_for_workers=False, multi_tenant=True, timeout=timedelta(hours=2))


@contextlib.contextmanager
def loopback_store():
    """A store in this process on 127.0.0.1: (port, the environment torchrun's agents need)."""
    sock = loopback_listener()
    port = sock.getsockname()[1]
    store = serve(sock.detach())
    try:
        yield port, loopback_store_env(port)
    finally:
        del store


@dataclass(frozen=True)
class RendezvousArgs:
    fd: int = field(default=-1, metadata=setting("a socket bound to 127.0.0.1 and listening", required=True))


def main() -> None:
    store = serve(parse(RendezvousArgs, description=__doc__).fd)  # noqa: F841 - serves while referenced
    signal.pause()


if __name__ == "__main__":
    main()
