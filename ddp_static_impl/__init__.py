"""torch-ddp-static: DistributedDataParallel told that its graph is static."""
