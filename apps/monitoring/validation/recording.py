"""What the `business-validation` kind reads before its fan-out and writes after it (kept apart from the kind, so
that the app's services may import the kind and the kind this module)."""

from datetime import UTC, datetime
from urllib.parse import quote

from django.conf import settings

from apps.monitoring.models import BusinessValidation
from apps.monitoring.validation import loadtest, measure
from apps.workloads.models import InferenceService


def validation_plan(job) -> tuple[measure.Plan | None, str, int | None]:
    """(plan, why not, service id) for a business-validation job: the service's endpoint (the simulator's for it over
    the sim transport), nodes, design figures and the load profile from the job's parameters."""
    parameters = job.parameters
    service = InferenceService.objects.filter(name=parameters["service"]).prefetch_related("nodes").first()
    if service is None:
        return None, f"the inference service {parameters['service']!r} no longer exists", None
    endpoint = service.endpoint
    if job.transport == "sim":
        exporters = settings.RACKPILOT_SIM_EXPORTERS
        if not exporters:
            return None, "RACKPILOT_SIM_EXPORTERS is empty: no simulated endpoint to test", service.pk
        endpoint = f"http://{exporters}/services/{quote(service.name, safe='')}/v1"
    if not endpoint:
        return None, f"{service.name} has no endpoint", service.pk
    plan = measure.Plan(
        service=service.name,
        model=service.model,
        endpoint=endpoint,
        hostnames=tuple(sorted(node.hostname for node in service.nodes.all())),
        design_tokens_per_second=float(service.design_tokens_per_second),
        latency_target_ms=float(service.latency_target_ms),
        profile=loadtest.Profile(
            concurrency=parameters["concurrency"],
            requests=parameters["requests"],
            prompt_tokens=parameters["prompt_tokens"],
            output_tokens=parameters["output_tokens"],
            api=parameters["api"],
            timeout_seconds=parameters["timeout_seconds"],
        ),
        settle_seconds=parameters["settle_seconds"],
    )
    return plan, "", service.pk


def record_validation(*, job, service_id: int, endpoint: str, profile: dict, answer: dict) -> BusinessValidation:
    """Store one run's verdict (once per job: a re-run of the hook replaces it)."""

    def moment(key):
        value = answer.get(key)
        return datetime.fromtimestamp(value, tz=UTC) if value else None

    validation, _ = BusinessValidation.objects.update_or_create(
        job=job,
        defaults={
            "service_id": service_id,
            "endpoint": endpoint,
            "outcome": answer["outcome"],
            "started_at": moment("started"),
            "finished_at": moment("ended"),
            "profile": profile,
            "figures": answer.get("figures", {}),
            "verdicts": answer["verdicts"],
            "message": answer.get("message", "")[:300],
        },
    )
    return validation
