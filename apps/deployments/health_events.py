"""Cluster acceptance's failed link checks as health events (apps/health): a NIC whose CRC/symbol error counters grew
past the tiers over the multi-node NCCL test is `link_errors` on its cable (its NIC where no cable is inventoried),
linked to the deployment and the benchmark run, with what grew. The acceptance sweep's suspects are recorded by the
sweep itself when its run ends (apps/benchmarks/health_events.py), linked to that run."""

from apps.deployments.choices import Outcome
from apps.health import services as health
from apps.health.choices import Severity, Source
from apps.health.models import HealthEvent
from apps.inventory.models import Nic

SEVERITY = {Outcome.FAIL: Severity.MAJOR, Outcome.WARN: Severity.MINOR}


def record_link_errors(*, deployment, run, items: list[dict]) -> list[HealthEvent]:
    events = []
    for item in items:
        if item["verdict"] not in SEVERITY:
            continue
        nic = (
            Nic.objects.select_related("node", "cable_as_a", "cable_as_b")
            .filter(node__hostname=item["node"], name=item["nic"])
            .first()
        )
        if nic is None:
            continue
        cable = getattr(nic, "cable_as_a", None) or getattr(nic, "cable_as_b", None)
        grew = ", ".join(f"{counter} +{delta:,}" for counter, delta in item["grew"].items())
        where = f" → {item['switch']}:{item['switch_port']}" if item.get("switch") else ""
        events.append(
            health.record_event(
                component=cable or nic,
                source=Source.ACCEPTANCE,
                kind="link_errors",
                severity=SEVERITY[item["verdict"]],
                summary=f"{nic}{where}: CRC/symbol errors grew over the NCCL test ({grew})",
                evidence={
                    "deployment": str(deployment.public_id),
                    "benchmark_run": str(run.public_id),
                    "grew": item["grew"],
                    "frames": item["frames"],
                    "errors_per_million": item["errors_per_million"],
                    "switch": item.get("switch", ""),
                    "switch_port": item.get("switch_port", ""),
                },
                at=run.finished,
            )
        )
    return events
