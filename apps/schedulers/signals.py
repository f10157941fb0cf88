"""Sent when a readback finds a node's scheduler state changed (or read for the first time): `node`, `before` (the
stored values before, None the first time) and `after` (the values now), as `services.view_of()` gives them. The
health events' producer listens here; the schedulers app knows nothing of it."""

from django.dispatch import Signal

scheduler_state_changed = Signal()
