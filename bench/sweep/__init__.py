"""A sweep: many runs (bench.run) into one store.
- plan: variants x device counts x engines, in the order that makes them comparable.
- runner: the planned runs, one after another into one store; forecast: its clock.
- resume: what a stopped sweep has left to run; preview: the dry run.
- tracking: optional MLflow tracking of each run.
"""
