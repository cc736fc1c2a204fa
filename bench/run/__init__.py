"""Running: the run spec, one launcher function per launcher, processes, one run, the sweep,
the dataset cache, the environment recorded with every row, optional MLflow tracking."""
