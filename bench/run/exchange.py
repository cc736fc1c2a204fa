"""A multi-host run's meeting before launch. Every node agent tells node 0's agent its node rank, its address
and the ports it picked; node 0's agent answers each of them with every node's, once all have come. So each
TensorFlow task gets a full TF_CONFIG, node 0's row names every host, and what only the hosts together can
know is refused on every host before anything starts: a node rank given twice, mismatched --nnodes, another
variant. A host that never comes fails the run on every host within its timeout, naming it.

One JSON line each way over TCP on node 0's --master-addr and --master-port, closed before the variant's
launcher takes that port. Standard library only.
"""
from __future__ import annotations

import json
import socket
import time
from dataclasses import asdict, dataclass

from bench.spec.task import SpecError

RETRY_S = 0.5


@dataclass(frozen=True)
class Offer:
    node_rank: int
    nodes: int
    variant: str
    address: str      # this host's address on the collectives' interface
    ports: list[int]  # free on this host: its TensorFlow tasks' (bench.run.launch.Launcher.ports)


class NeverJoined(RuntimeError):
    """A host did not come (or node 0's agent did not answer) within the run's timeout."""


def meet(offer: Offer, master: tuple[str, int], timeout_s: float) -> dict[int, Offer]:
    """Every node's offer by node rank, once all `offer.nodes` have met (node 0 hosts the meeting)."""
    deadline = time.monotonic() + timeout_s
    return _host(offer, master, deadline) if offer.node_rank == 0 else _join(offer, master, deadline)


def _host(mine: Offer, master: tuple[str, int], deadline: float) -> dict[int, Offer]:
    offers, peers, answer = {0: mine}, [], {"error": "node 0's agent gave up"}
    with socket.create_server(master) as server:
        try:
            while len(offers) < mine.nodes:
                server.settimeout(max(0.01, deadline - time.monotonic()))
                try:
                    peer, _ = server.accept()
                except TimeoutError:
                    missing = sorted(set(range(mine.nodes)) - set(offers))
                    raise NeverJoined(f"node(s) {missing} never joined the run at {master[0]}:{master[1]} "
                                      "within its timeout: start their agents, or check their --master-addr") from None
                peers.append(peer)
                peer.settimeout(max(0.01, deadline - time.monotonic()))
                theirs = Offer(**json.loads(peer.makefile().readline()))
                problem = _mismatch(mine, theirs, offers)
                if problem:
                    raise SpecError(problem)
                offers[theirs.node_rank] = theirs
            answer = {"offers": [asdict(o) for o in offers.values()]}
        except (SpecError, NeverJoined) as exc:
            answer = {"error": str(exc), "never_joined": isinstance(exc, NeverJoined)}
            raise
        finally:
            for peer in peers:
                try:
                    peer.sendall((json.dumps(answer) + "\n").encode())
                except OSError:
                    pass
                peer.close()
    return offers


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


def _join(mine: Offer, master: tuple[str, int], deadline: float) -> dict[int, Offer]:
    while True:
        try:
            connection = socket.create_connection(master, timeout=max(0.01, deadline - time.monotonic()))
            break
        except OSError:
            if time.monotonic() + RETRY_S > deadline:
                raise NeverJoined(f"node 0's agent at {master[0]}:{master[1]} never answered within the run's "
                                  "timeout: start it, or check --master-addr and --master-port") from None
            time.sleep(RETRY_S)
    with connection:
        connection.settimeout(max(0.01, deadline - time.monotonic()))
        connection.sendall((json.dumps(asdict(mine)) + "\n").encode())
        try:
            answer = json.loads(connection.makefile().readline() or "{}")
        except (TimeoutError, OSError) as exc:
            raise NeverJoined(f"node 0's agent at {master[0]}:{master[1]} did not answer: {exc}") from None
    if answer.get("never_joined"):
        raise NeverJoined(answer["error"])
    if "error" in answer or "offers" not in answer:
        raise SpecError(answer.get("error", "node 0's agent closed the meeting without an answer"))
    return {o["node_rank"]: Offer(**o) for o in answer["offers"]}
