"""--profile for the TensorFlow variants: TensorFlow's profiler (`tf.profiler.experimental`) over the profiled
windows, its TensorBoard profile per worker in the run folder, and its host trace cut into the common
categories (bench.worker.profile).

Every operation the executor runs is traced on the thread that ran it as `scope/name:Type`. The tape's
gradient ops (`gradient_tape/...`) are backward, the optimizer's (its name scope) optimizer, collectives
communication, tf.data's iterator and prefetch events input, every other op of the step forward (the
model and the loss); the executor's and the runtime's own events are framework. The host plane only:
TensorFlow's GPU rows are not run here (docs/gpus-and-clusters.md).
"""
from __future__ import annotations

import re
from collections import defaultdict

import tensorflow as tf
from tensorflow.tsl.profiler.protobuf import xplane_pb2

from bench.worker import Worker
from bench.worker.profile import Span, summary

MARKER = "dtbench.profiled"
COMMUNICATION = ("Collective", "Nccl", "AllReduce")
INPUT = ("IteratorGetNext", "Iterator::", "Prefetch", "MultiDeviceIterator", "GetNextFromShard")
TOP_OPS = 8
OP = re.compile(r"([^\s:]+):([A-Za-z_]\w*)")  # an executed operation: scope/name:Type


class TFProfiler:
    """tf.profiler from `start` to `stop`; on stop, the worker's TensorBoard profile and its summary."""

    def __init__(self, worker: Worker, optimizer_name: str):
        self.worker, self.optimizer_scope = worker, optimizer_name.lower() + "/"
        self.logdir = worker.profile_dir / f"rank{worker.rank}"
        self.result: dict | None = None

    def start(self) -> None:
        options = tf.profiler.experimental.ProfilerOptions(host_tracer_level=2, python_tracer_level=0,
                                                           device_tracer_level=1)
        tf.profiler.experimental.start(str(self.logdir), options=options)

    def mark(self) -> None:

        self._marker = tf.profiler.experimental.Trace(MARKER)
        self._marker.__enter__()

    def stop(self, steps: int) -> None:

        self._marker.__exit__(None, None, None)
        tf.profiler.experimental.stop()
        [path] = self.logdir.glob("plugins/profile/*/*.xplane.pb")
        space = xplane_pb2.XSpace()
        space.ParseFromString(path.read_bytes())
        [host] = [plane for plane in space.planes if plane.name == "/host:CPU"]
        events = list(_events(host))
        [(start, end)] = [(s, e) for name, s, e in events if name == MARKER]
        spans = [Span(s, e, self.category(name)) for name, s, e in events if name != MARKER]
        self.result = summary(spans, start, end, steps, _top_ops(events, start, end),
                              str(path.relative_to(self.worker.profile_dir)))

    def category(self, name: str) -> str:
        if name.startswith(INPUT):
            return "input"
        executed = OP.fullmatch(name)
        if not executed:
            return "framework"  # the executor's and the runtime's own events
        op, kind = executed.groups()
        if any(word in kind for word in COMMUNICATION):
            return "communication"
        if kind.startswith(INPUT):
            return "input"
        if op.startswith("gradient_tape/"):
            return "backward"
        if op.startswith(self.optimizer_scope):
            return "optimizer"
        return "forward"


def _events(plane):
    """(name, start s, end s) of every event on every thread of the plane."""
    names = {key: meta.name for key, meta in plane.event_metadata.items()}
    for line in plane.lines:
        for event in line.events:
            start = line.timestamp_ns * 1e-9 + event.offset_ps * 1e-12
            yield names[event.metadata_id], start, start + event.duration_ps * 1e-12


def _top_ops(events, start: float, end: float) -> list[tuple[str, float, int]]:
    """The op types with the most time inside [start, end] (ops are the executor's leaves: their time is
    their own)."""
    seconds, calls = defaultdict(float), defaultdict(int)
    for name, s, e in events:
        executed = OP.fullmatch(name)
        if executed and s >= start and e <= end:
            kind = executed.group(2)
            seconds[kind] += e - s
            calls[kind] += 1
    ranked = sorted(seconds, key=seconds.get, reverse=True)[:TOP_OPS]
    return [(kind, seconds[kind], calls[kind]) for kind in ranked]
