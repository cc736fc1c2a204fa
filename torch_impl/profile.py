"""--profile for the PyTorch variants: torch.profiler over the profiled windows, a Chrome/Perfetto trace per
rank in the run folder, and its spans cut into the common categories (bench.worker.profile).

The loop labels its regions with `region(...)` (record_function: a few microseconds a step, profiled or
not). In the trace, an operator counts for the region it runs in; the DataLoader's own annotation is input;
collectives (gloo's and NCCL's spans, c10d's calls) are communication wherever they run, so a gradient
all-reduce in flight on gloo's thread while the backward pass computes is overlapped, and the training
thread's wait for it at the end of backward is exposed. On CUDA the device's kernels are the spans, each in
the region its annotation mirrors on the device.
"""
from __future__ import annotations

import contextlib
import gzip
import json
from bisect import bisect_right
from typing import Iterator

import torch
from torch.profiler import ProfilerActivity, profile, record_function

from bench.worker import Worker
from bench.worker.profile import COMPUTE, Span, summary
from torch_impl import own_time

LABEL = "dtbench."
MARKER = LABEL + "profiled"
COMMUNICATION = ("gloo:", "nccl", "c10d::", "allreduce", "all_reduce", "allgather", "all_gather", "reduce_scatter",
                 "_broadcast", "barrier", "record_param_comms")
INPUT = ("enumerate(DataLoader)",)
DEVICE_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")
TOP_OPS = 8


@contextlib.contextmanager
def region(name: str) -> Iterator[None]:
    """A labelled part of the step: input, forward, backward or optimizer. The forward is also the rank's own
    time (torch_impl/own_time.py), where the loop keeps it."""
    with record_function(LABEL + name), own_time.span() if name == "forward" else contextlib.nullcontext():
        yield


class TorchProfiler:
    """torch.profiler (with record_shapes) from `start` to `stop`; on stop, the rank's trace and summary."""

    def __init__(self, worker: Worker, device: torch.device):
        self.worker, self.cuda = worker, device.type == "cuda"
        self.result: dict | None = None

    def start(self) -> None:
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if self.cuda else [])
        self._profile = profile(activities=activities, record_shapes=True)
        self._profile.__enter__()

    def mark(self) -> None:
        self._marker = record_function(MARKER)
        self._marker.__enter__()

    def stop(self, steps: int) -> None:
        self._marker.__exit__(None, None, None)
        self._profile.__exit__(None, None, None)
        self.worker.profile_dir.mkdir(exist_ok=True)
        trace = self.worker.profile_dir / f"rank{self.worker.rank}.pt.trace.json.gz"
        self._profile.export_chrome_trace(str(trace))
        with gzip.open(trace, "rt") as f:
            events = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]
        [marker] = [e for e in events if e["name"] == MARKER]
        spans = device_spans(events) if self.cuda else host_spans(events, marker["tid"])
        start, end = marker["ts"] / 1e6, (marker["ts"] + marker["dur"]) / 1e6
        self.result = summary(spans, start, end, steps, self._top_ops(steps), trace.name)

    def _top_ops(self, steps: int) -> list[tuple[str, float, int]]:
        """The operators with the most self time (the device's on CUDA), from the profiler's own averages."""
        attribute = "self_device_time_total" if self.cuda else "self_cpu_time_total"
        ops = [e for e in self._profile.key_averages() if not e.key.startswith(LABEL)]
        ops.sort(key=lambda e: getattr(e, attribute), reverse=True)
        return [(e.key, getattr(e, attribute) / 1e6, e.count) for e in ops[:TOP_OPS]]


def _category_of_name(name: str) -> str | None:
    lowered = name.lower()
    if any(word in lowered for word in COMMUNICATION):
        return "communication"
    if name.startswith(INPUT):
        return "input"
    return None


class _Regions:
    """The labelled regions of one timeline, to find the one an event runs in."""

    def __init__(self, annotations: list[dict]):
        own = sorted((e for e in annotations if e["name"].startswith(LABEL) and e["name"] != MARKER),
                     key=lambda e: e["ts"])
        self.starts = [e["ts"] for e in own]
        self.regions = own

    def of(self, event: dict) -> str | None:
        at = bisect_right(self.starts, event["ts"]) - 1
        if at >= 0:
            r = self.regions[at]
            if event["ts"] + event.get("dur", 0) <= r["ts"] + r["dur"]:
                return r["name"][len(LABEL):]
        return None


def host_spans(events: list[dict], main_tid) -> list[Span]:
    """The training thread's operators by region, its regions' own time as framework (input's as input), and
    communication on every thread."""
    regions = _Regions([e for e in events if e["tid"] == main_tid and e.get("cat") == "user_annotation"])
    spans = []
    for e in events:
        category = _category_of_name(e["name"])
        if category is None and e["tid"] == main_tid and e["name"] != MARKER:
            if e["name"].startswith(LABEL):
                category = "input" if e["name"] == LABEL + "input" else "framework"
            else:
                inside = regions.of(e)
                category = inside if inside in (*COMPUTE, "input") else "framework"
        if category is not None:
            spans.append(Span(e["ts"] / 1e6, (e["ts"] + e.get("dur", 0)) / 1e6, category))
    return spans


def device_spans(events: list[dict]) -> list[Span]:
    """CUDA: the device's kernels, copies and sets by the region their annotation mirrors on the device
    (NCCL's kernels as communication), and the host's input as input."""
    by_stream: dict = {}
    for e in events:
        if e.get("cat") == "gpu_user_annotation":
            by_stream.setdefault((e["pid"], e["tid"]), []).append(e)
    regions = {stream: _Regions(annotations) for stream, annotations in by_stream.items()}
    spans = []
    for e in events:
        if e.get("cat") in DEVICE_CATEGORIES:
            inside = regions[(e["pid"], e["tid"])].of(e) if (e["pid"], e["tid"]) in regions else None
            category = _category_of_name(e["name"]) or (inside if inside in (*COMPUTE, "input") else "framework")
        elif e["name"] == LABEL + "input" or e["name"].startswith(INPUT):
            category = "input"
        else:
            continue
        spans.append(Span(e["ts"] / 1e6, (e["ts"] + e.get("dur", 0)) / 1e6, category))
    return spans
