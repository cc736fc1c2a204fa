"""Reading the rows: statistics (scipy), repeats folded and efficiencies (pandas), report, plots,
and the microbenchmarks that explain them (all-reduce, harness overhead)."""
