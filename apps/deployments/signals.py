"""Sent once a `scheduler-action` job has its final status (after commit, the node's read back stored): `job`.
Apps above deployments listen (a repair's return to service waits for the scheduler's resume); deployments know
nothing of them."""

from django.dispatch import Signal

scheduler_action_finished = Signal()
