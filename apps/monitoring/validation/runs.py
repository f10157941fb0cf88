"""Business validation runs: starting one for an inference service, and what pages, the API and acceptance reports
read of them. Reads only, except `start`, which creates the job (the kind writes the result)."""

from apps.jobs.models import Job
from apps.jobs.services import TargetSpec, create_job
from apps.monitoring.models import BusinessValidation
from apps.workloads.models import InferenceService

KIND = "business-validation"  # the kind: apps/monitoring/kinds/business_validation.py


def start(*, service: InferenceService, parameters: dict, transport: str | None = None, requested_by=None) -> Job:
    """A business-validation job for the service, its cell on the service's first node (by host name). Raises
    serializers.ValidationError naming the field (`parameters.<name>`, `transport`), creating nothing."""
    first = service.nodes.order_by("hostname").values_list("hostname", flat=True).first()
    return create_job(
        kind=KIND,
        targets=TargetSpec(nodes=(first,) if first else ()),
        parameters={**parameters, "service": service.name},
        transport=transport,
        requested_by=requested_by,
    )


def runs():
    return BusinessValidation.objects.select_related("service", "job")


def runs_of(service: InferenceService):
    return runs().filter(service=service)


def for_hostnames(hostnames: list[str]) -> list[dict]:
    """For each inference service served by any of these nodes: its latest business validation run (or none yet),
    as the acceptance report shows it."""
    services = InferenceService.objects.filter(nodes__hostname__in=hostnames).distinct().prefetch_related("nodes")
    blocks = []
    for service in services.order_by("name"):
        latest = runs_of(service).first()
        served = sorted(node.hostname for node in service.nodes.all() if node.hostname in set(hostnames))
        block = {
            "service": service.name,
            "model": service.model,
            "nodes": served,
            "design_tokens_per_second": service.design_tokens_per_second,
            "outcome": latest.outcome if latest else "not run",
            "verdicts": latest.verdicts if latest else [],
            "figures": latest.figures if latest else {},
            "profile": latest.profile if latest else {},
            "endpoint": latest.endpoint if latest else "",
            "finished_at": latest.finished_at.isoformat() if latest and latest.finished_at else None,
            "job": str(latest.job.public_id) if latest else None,
        }
        blocks.append(block)
    return blocks
