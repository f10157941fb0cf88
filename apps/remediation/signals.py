"""Sent after commit when a repair's validation passed and its node was cleared: `repair`, `gate`. Apps above
remediation listen (diagnosis resolves the incidents whose events the repair fixed); remediation knows nothing of
them."""

from django.dispatch import Signal

repair_validated = Signal()
