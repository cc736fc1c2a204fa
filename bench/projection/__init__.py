"""`bench project`: throughput projected past the measured topologies (a link, more hosts) from one-host inputs,
labelled projected and scored against measured points."""
