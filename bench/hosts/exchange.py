"""A multi-host run's meeting before launch. Every node agent tells node 0's agent its node rank, its address
and the ports it picked; node 0's agent answers each of them with every node's, once all have come. So each
TensorFlow task gets a full TF_CONFIG, node 0's row names every host, and what only the hosts together can
know is refused on every host before anything starts: a node rank given twice, mismatched --nnodes, another
variant. A host that never comes fails the run on every host within its timeout, naming it.

One JSON line each way over TCP on node 0's --master-addr and --master-port, closed before the variant's
launcher takes that port. The connections stay open for the run (`Session`): an agent that goes away (its
host died, it was killed) ends the run on every other host within a fraction of a second, and hosts whose
processes only serve (tf-ps's workers and parameter servers) stop when node 0's agent closes. Standard
library only.
"""
from __future__ import annotations

import json
import os
import socket
import time
from dataclasses import asdict, dataclass, field

from bench.spec.task import SpecError

RETRY_S = 0.5


@dataclass(frozen=True)
class Offer:
    node_rank: int
    nodes: int
    variant: str
    address: str      # this host's address on the collectives' interface
    interface: str    # that interface's name
    ports: list[int]  # free on this host: its TensorFlow tasks' (bench.run.launch.Launcher.ports)


class NeverJoined(RuntimeError):
    """A host did not come (or node 0's agent did not answer) within the run's timeout, or the meeting's port or a
    connection to it was closed under it."""


@dataclass
class Session:
    """The open connections of a met run: node 0's to every other agent (by node rank), or one to node 0's."""
    offers: dict[int, Offer]
    peers: dict[int, socket.socket] = field(default_factory=dict)

    def __post_init__(self):
        for peer in self.peers.values():
            peer.setblocking(False)  # `gone` peeks; with a timeout set, Python would wait for data first

    def gone(self) -> list[int]:
        """The node ranks whose agent has closed its end (never blocks)."""
        out = []
        for rank, peer in self.peers.items():
            try:
                if peer.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b"":
                    out.append(rank)
            except BlockingIOError:
                pass
            except OSError:
                out.append(rank)
        return out

    def wait_for_close(self, timeout_s: float) -> None:
        """Another node's agent, its processes done: hold the session until node 0's agent ends it."""
        deadline = time.monotonic() + timeout_s
        while self.peers and self.ended() is None and time.monotonic() < deadline:
            time.sleep(0.2)

    def ended(self) -> str | None:
        """Another node: how node 0's run ended ("ok", "failed", ...), "gone" if its agent went away without
        saying, None while it runs (never blocks)."""
        [(_, peer)] = self.peers.items()
        try:
            data = peer.recv(4096, socket.MSG_PEEK)
        except BlockingIOError:
            return None
        except OSError:
            return "gone"
        if not data.endswith(b"\n"):
            return "gone" if data == b"" else None
        return json.loads(data.decode().splitlines()[-1]).get("ended", "gone")

    def close(self, status: str | None = None) -> None:
        """Node 0: tell every other agent how the run ended (`status`), then close."""
        for peer in self.peers.values():
            if status is not None:
                try:
                    peer.setblocking(True)
                    peer.settimeout(2.0)
                    peer.sendall((json.dumps({"ended": status}) + "\n").encode())
                except OSError:
                    pass
            peer.close()
        self.peers = {}


def meet(offer: Offer, master: tuple[str, int], timeout_s: float) -> Session:
    """Every node's offer by node rank, once all `offer.nodes` have met (node 0 hosts the meeting)."""
    deadline = time.monotonic() + timeout_s
    return _host(offer, master, deadline) if offer.node_rank == 0 else _join(offer, master, deadline)


def _host(mine: Offer, master: tuple[str, int], deadline: float) -> Session:
    offers, peers, answer = {0: mine}, {}, {"error": "node 0's agent gave up"}
    try:
        server = socket.create_server(master)
    except OSError as exc:
        raise SpecError(f"--master-port {master[1]}: cannot listen on {master[0]}:{master[1]} ({os.strerror(exc.errno)}): "
                        "give every host another free port") from None
    with server:
        try:
            while len(offers) < mine.nodes:
                server.settimeout(max(0.01, deadline - time.monotonic()))
                try:
                    peer, (address, *_) = server.accept()
                except TimeoutError:
                    missing = sorted(set(range(mine.nodes)) - set(offers))
                    raise NeverJoined(f"node(s) {missing} never joined the run at {master[0]}:{master[1]} "
                                      "within its timeout: start their agents, or check their --master-addr") from None
                except OSError as exc:  # the listener closed under it (EINVAL)
                    missing = sorted(set(range(mine.nodes)) - set(offers))
                    raise NeverJoined(f"the meeting at {master[0]}:{master[1]} was closed before node(s) {missing} "
                                      f"joined ({os.strerror(exc.errno) if exc.errno else exc})") from None
                peer.settimeout(max(0.01, deadline - time.monotonic()))
                theirs = _offer(peer, address, master)
                peers[theirs.node_rank if theirs.node_rank not in peers else -len(peers)] = peer
                problem = _mismatch(mine, theirs, offers)
                if problem:
                    raise SpecError(problem)
                offers[theirs.node_rank] = theirs
            answer = {"offers": [asdict(o) for o in offers.values()]}
        except (SpecError, NeverJoined) as exc:
            answer = {"error": str(exc), "never_joined": isinstance(exc, NeverJoined)}
            raise
        finally:
            for peer in peers.values():
                try:
                    peer.sendall((json.dumps(answer) + "\n").encode())
                except OSError:
                    pass
                if "offers" not in answer:
                    peer.close()
    return Session(offers, peers)


def _offer(peer: socket.socket, address: str, master: tuple[str, int]) -> Offer:
    """A joining agent's offer: one JSON line, unless its connection closed (or was closed) first."""
    try:
        return Offer(**json.loads(peer.makefile().readline()))
    except (OSError, ValueError, TypeError) as exc:  # reset, timed out, or a line cut short
        peer.close()
        raise NeverJoined(f"the host at {address} left the meeting at {master[0]}:{master[1]} before saying "
                          f"which node it is ({str(exc) or type(exc).__name__})") from None


def _mismatch(mine: Offer, theirs: Offer, offers: dict[int, Offer]) -> str | None:
    if theirs.nodes != mine.nodes:
        return (f"the host at {theirs.address} was started with --nnodes {theirs.nodes}, node 0 with "
                f"{mine.nodes}: give every host the same --nnodes")
    if theirs.variant != mine.variant:
        return f"the host at {theirs.address} runs {theirs.variant}, node 0 {mine.variant}: give every host the same --variant"
    if theirs.node_rank in offers:
        return (f"two hosts gave --node-rank {theirs.node_rank} ({offers[theirs.node_rank].address} and "
                f"{theirs.address}): give each host its own, 0..{mine.nodes - 1}")
    return None


def _join(mine: Offer, master: tuple[str, int], deadline: float) -> Session:
    while True:
        try:
            connection = socket.create_connection(master, timeout=max(0.01, deadline - time.monotonic()))
            break
        except OSError:
            if time.monotonic() + RETRY_S > deadline:
                raise NeverJoined(f"node 0's agent at {master[0]}:{master[1]} never answered within the run's "
                                  "timeout: start it, or check --master-addr and --master-port") from None
            time.sleep(RETRY_S)
    connection.settimeout(max(0.01, deadline - time.monotonic()))
    try:
        connection.sendall((json.dumps(asdict(mine)) + "\n").encode())
        answer = json.loads(connection.makefile().readline() or "{}")
    except (OSError, ValueError) as exc:  # timed out, reset, or a line cut short
        connection.close()
        raise NeverJoined(f"node 0's agent at {master[0]}:{master[1]} did not answer ({exc}): check that node 0 "
                          "runs dtbench there, on a port no other program holds") from None
    if "offers" not in answer:
        connection.close()
        if answer.get("never_joined"):
            raise NeverJoined(answer["error"])
        raise SpecError(answer.get("error", "node 0's agent closed the meeting without an answer"))
    return Session({o["node_rank"]: Offer(**o) for o in answer["offers"]}, {0: connection})
