"""What an approach's launcher (`<approach>_impl/launch.py`) may use of the harness, and all of it: the run it
starts (RunSpec), one node's plan (NodePlan), what every node's launch shares (LaunchContext), the processes it
returns (Process), its own description (Launcher), the environments the harness builds for a node, the
interpreter of a variant's family, and the knobs a run set (a launcher that writes them into a config file). The approaches import these from here only, so that the harness's own modules
(bench/run/, bench/spec/devices.py) can move without touching an approach."""
from bench import REPO_ROOT
from bench.run.interpreters import python_for
from bench.run.launch import LaunchContext, Launcher, node_environment, rendezvous_environment
from bench.run.processes import Process
from bench.run.runspec import RunSpec
from bench.spec.devices import NodePlan
from bench.spec.knobs import chosen as chosen_knobs

__all__ = ["REPO_ROOT", "LaunchContext", "Launcher", "NodePlan", "Process", "RunSpec", "chosen_knobs",
           "node_environment", "python_for", "rendezvous_environment"]
