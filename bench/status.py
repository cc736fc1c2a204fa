"""How a run ended: the status its row records. Standard library only, so that the harness, the watchdog
(`bench.run.reaper`) and a rank may all name it.

A StrEnum: a member is the plain string a stored row holds (json.dumps writes its value), so rows written before
it load and compare as they did."""
from enum import StrEnum


class Status(StrEnum):
    OK = "ok"
    FAILED = "failed"                # a process died, or the ranks' reports could not be folded
    TIMEOUT = "timeout"              # no result within the run's timeout
    SKIPPED = "skipped"              # not applicable to this machine or task: never launched
    INTERRUPTED = "interrupted"      # stopped by a signal, or its harness died with it in flight
    DOES_NOT_FIT = "does not fit"    # its allocator refused it memory: a result under the memory given, not a fault
