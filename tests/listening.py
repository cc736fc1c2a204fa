"""Which TCP sockets the processes of a run listen on, read from /proc (no tool needed)."""
from __future__ import annotations

import os
import threading
from pathlib import Path

from bench.run.processes import RUN_ID_ENV

LOOPBACK_V6 = "00000000000000000000000001000000"  # ::1
V4_MAPPED_PREFIX = "0000000000000000FFFF0000"        # ::ffff:a.b.c.d


def _listening_inodes() -> dict[str, str]:
    """socket inode -> local address (hex ip:port) of every listening TCP socket."""
    found = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A":  # TCP_LISTEN
                found[fields[9]] = fields[1]
    return found


def run_listeners(run_ids: set[str]) -> set[tuple[str, str]]:
    """(command name, hex address) of every listening socket held by a process of these runs (not of another
    test's run on the other worker)."""
    inodes = _listening_inodes()
    wanted = {f"{RUN_ID_ENV}={run_id}".encode() for run_id in run_ids}
    out = set()
    for pid in (d for d in os.listdir("/proc") if d.isdigit()):
        try:
            if wanted.isdisjoint(Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")):
                continue
            name = Path(f"/proc/{pid}/comm").read_text().strip()
            for fd in os.listdir(f"/proc/{pid}/fd"):
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
                if link.startswith("socket:[") and link[8:-1] in inodes:
                    out.add((name, inodes[link[8:-1]]))
        except OSError:
            continue
    return out


def is_loopback(address: str) -> bool:
    """127.0.0.0/8 or ::1 (or 127/8 mapped into IPv6); /proc writes IPv4 little-endian in hex."""
    ip = address.split(":")[0]
    if len(ip) == 8:
        return ip.endswith("7F")
    return ip == LOOPBACK_V6 or (ip.startswith(V4_MAPPED_PREFIX) and ip.endswith("7F"))


class ListenerWatch:
    """Polls the listening sockets of the runs a test starts, in the background while they go on: `of` is the
    results folder they write (their ids: its runs/ folders) or the one run id the test gave them."""

    def __init__(self, of: Path | str, interval: float = 0.1):
        self._of = of
        self.seen: set[tuple[str, str]] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, args=(interval,), daemon=True)

    def _poll(self, interval: float) -> None:
        while not self._stop.is_set():
            ids = {self._of} if isinstance(self._of, str) else {p.name for p in (self._of / "runs").glob("*")}
            self.seen |= run_listeners(ids) if ids else set()
            self._stop.wait(interval)

    def __enter__(self) -> "ListenerWatch":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def beyond_loopback(self) -> set[tuple[str, str]]:
        return {(name, addr) for name, addr in self.seen if not is_loopback(addr)}


def listeners_of(pid: int) -> set[str]:
    """The hex addresses of the listening TCP sockets process `pid` holds."""
    inodes = _listening_inodes()
    found = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        link = os.readlink(f"/proc/{pid}/fd/{fd}")
        if link.startswith("socket:[") and link[8:-1] in inodes:
            found.add(inodes[link[8:-1]])
    return found
