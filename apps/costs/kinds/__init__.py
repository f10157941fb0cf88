"""The job kinds of cost policies (docs/jobs.md): `power-limit` (power_limit.py) applies, reverts and re-applies GPU
power limits; the storage-tiering kinds (tiering.py) survey a node's files and move them; actions.py is what both
record when a run ends."""
