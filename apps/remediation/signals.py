"""Sent after commit. `repair_validated` when a repair's validation passed and its node was cleared: `repair`,
`gate`. `repair_returned` when the scheduler took the repaired node back into service: `repair`. Apps above
remediation listen (diagnosis resolves the incidents whose events the repair fixed, and re-checks the node's other
incidents once it is back); remediation knows nothing of them."""

from django.dispatch import Signal

repair_validated = Signal()
repair_returned = Signal()
