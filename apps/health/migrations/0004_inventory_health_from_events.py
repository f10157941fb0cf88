from django.db import migrations
from django.utils import timezone

from apps.health.services import gpu_health_of, state_of
from apps.inventory.choices import HEALTH_OF_PRESENCE


def record_from_open_events(apps, schema_editor):
    """Writes what the open events say on the inventory (`Node.health_state`, `Gpu.health`), as
    apps/health/services.record_inventory_health does from now on. A GPU someone marked warning or failed by hand,
    with no open event saying why, keeps its state as an operator's event (its health comes from events now)."""
    HealthEvent = apps.get_model("health", "HealthEvent")
    Gpu = apps.get_model("inventory", "Gpu")
    Node = apps.get_model("inventory", "Node")
    open_events = HealthEvent.objects.filter(cleared_at__isnull=True)
    now = timezone.now()
    marked = Gpu.objects.filter(health__in=["warning", "failed"]).exclude(
        pk__in=open_events.filter(gpu__isnull=False).values("gpu_id")
    )
    for gpu in marked.select_related("node"):
        HealthEvent.objects.create(
            component_type="gpu",
            component_key=f"gpu:{gpu.pk}",
            component_label=f"{gpu.node.hostname} GPU{gpu.index}",
            node_id=gpu.node_id,
            gpu_id=gpu.pk,
            source="operator",
            sources=["operator"],
            kind="marked_in_inventory",
            severity="major" if gpu.health == "failed" else "minor",
            summary=f"GPU {gpu.index}: marked {gpu.health} in the inventory (before its health came from events)",
            first_seen=now,
            last_seen=now,
            evidence=[{"at": now.isoformat(), "source": "operator", "health": gpu.health}],
        )
    by_gpu, by_node = {}, {}
    for event in open_events.only("gpu_id", "node_id", "kind", "severity"):
        if event.gpu_id is not None:
            by_gpu.setdefault(event.gpu_id, []).append(event)
        if event.node_id is not None:
            by_node.setdefault(event.node_id, []).append(event)
    for presence, health in HEALTH_OF_PRESENCE.items():
        Gpu.objects.filter(presence=presence).exclude(pk__in=list(by_gpu)).update(health=health)
    for gpu in Gpu.objects.filter(pk__in=list(by_gpu)).only("presence"):
        Gpu.objects.filter(pk=gpu.pk).update(health=gpu_health_of(presence=gpu.presence, events=by_gpu[gpu.pk]))
    for node_id, events in by_node.items():
        Node.objects.filter(pk=node_id).update(health_state=state_of(events))


class Migration(migrations.Migration):
    dependencies = [
        ("health", "0003_nvlink_switch_tray_component"),
        ("inventory", "0016_gpu_presence_node_health_state"),
    ]

    operations = [migrations.RunPython(record_from_open_events, migrations.RunPython.noop)]
