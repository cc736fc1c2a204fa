"""What each `python -m bench` command does once its options are parsed (bench.cli): build the runs, call the
harness, print where the results went. One module a family of commands; what they share in `common`."""
from bench.commands.catalogue import cmd_list, cmd_schema
from bench.commands.common import finish_stopped
from bench.commands.data import cmd_data
from bench.history.command import cmd_history
from bench.commands.reports import cmd_compare, cmd_project, cmd_report
from bench.commands.runs import cmd_collectives, cmd_maxbatch, cmd_peak, cmd_run
from bench.commands.studies import cmd_audit, cmd_gpu_check, cmd_overhead, cmd_regress
from bench.commands.sweeps import cmd_sweep, cmd_tune

__all__ = ["cmd_audit", "cmd_collectives", "cmd_compare", "cmd_data", "cmd_gpu_check", "cmd_history", "cmd_list", "cmd_maxbatch",
           "cmd_overhead", "cmd_peak", "cmd_project", "cmd_regress", "cmd_report", "cmd_run", "cmd_schema", "cmd_sweep",
           "cmd_tune", "finish_stopped"]
