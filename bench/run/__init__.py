"""Running: the machinery of one run, and the sweep that runs many into one store. Studies built on runs (the
fast-path audit, the microbenchmarks, maxbatch, the overhead checks) live in bench.studies.

One run, in the order it happens:
- runspec: one variant on one topology for one task, checked before anything starts.
- launch, interpreters: what to start (each approach's own launcher lives in its package) and with which Python.
- loopback, rendezvous, exchange, interface: the run's listeners on loopback, its store, a multi-host run's
  meeting before launch and the interface its collectives use.
- execute: write the spec, start, wait, fold the ranks' records into the row.
- processes, reaper, stacks: starting and waiting with a timeout; no process outlives the run; a hung run's stacks.
- fold: the ranks' JSON lines folded into the row's figures.
- sampler, sampler_plot: what the run did over time, and its figure.
- environment: what every row records about the machine and the libraries.

A sweep:
- plan: variants x device counts x engines, in the order that makes them comparable.
- sweep: the planned runs, one after another into one store; forecast: its clock.
- resume: what a stopped sweep has left to run; preview: the dry run.
- tracking: optional MLflow tracking of each run.
"""
