"""Wiring of the acceptance report: monitoring's business validation joins the deployments' report here (the report
asks through a hook, so deployments does not import monitoring: monitoring already reaches deployments through
diagnosis)."""

from apps.deployments.report import register_business_validation
from apps.monitoring.validation.runs import for_hostnames

register_business_validation(for_hostnames)
