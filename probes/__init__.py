"""What the probe processes run (the measured matmul peak, the all-reduce, the plain loop outside the
harness): framework code the harness starts, like an approach, but no approach of its own."""
