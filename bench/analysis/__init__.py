"""Reading a results folder: the rows folded once (repeats, efficiencies), the ratios and their intervals, and the
verdict that ranks the approaches. The report (bench.report), the projection (bench.projection) and the comparison of
folders (bench.compare) read it; nothing here draws or writes a page."""
