"""Faults of the simulated cluster. Each kind is one entry in kinds.py: its label, what it targets, its parameters,
what it does to a node's state, which command-made changes repair it, and the sentence that names it."""
