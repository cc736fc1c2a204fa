"""One run: the machinery that starts one variant on one topology and folds what its ranks report into a row.
The hosts it runs on are bench.hosts; the sweep that runs many into one store is bench.sweep; studies built on runs
(the fast-path audit, the microbenchmarks, maxbatch, the overhead checks) live in bench.studies.

In the order it happens:
- runspec: one variant on one topology for one task, checked before anything starts.
- model_check: a library's or the user's model built once in its framework's process, before anything starts.
- launch, interpreters: what to start (each approach's own launcher lives in its package) and with which Python.
- execute: write the spec, start, wait, fold the ranks' records into the row.
- processes, reaper, stacks: starting and waiting with a timeout; no process outlives the run; a hung run's stacks.
- fold: the ranks' JSON lines folded into the row's figures.
- sampler, sampler_plot: what the run did over time, and its figure.
- environment: what every row records about the machine and the libraries.
"""
