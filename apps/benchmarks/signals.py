"""Sent once a benchmark run has its final status (succeeded, failed, canceled, error), after its health events are
recorded: `run`. Apps above the benchmarks listen (a repair's validation waits on its runs); the benchmarks know
nothing of them."""

from django.dispatch import Signal

run_finished = Signal()
