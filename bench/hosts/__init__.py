"""The hosts a run spans and how they reach each other:
- loopback, rendezvous: the run's listeners on loopback and the rendezvous store its ranks meet at.
- exchange: a multi-host run's meeting before launch (each node's addresses and ports).
- interface: the network interface its collectives use.
"""
