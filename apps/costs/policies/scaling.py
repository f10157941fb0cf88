"""Policy 1, elastic scaling of an inference service: one replica per node of the service (its nodes are its pool).

Over the window, every step's mean GPU utilisation of the serving nodes: when even the lowest step is above
`threshold_up` % the service scales out; when even the highest is below `threshold_down` % it scales in, but only
once `cool_down_minutes` have passed since its last scaling (so it cannot flap). The new count is the autoscaler's
rule, ceil(replicas × utilisation / threshold_up), within min and max replicas: scaling out sizes for the mean,
scaling in for the window's peak, so the replicas left stay below `threshold_up`.

The saving: a node the service no longer needs can be powered down or lent out, so scaling in saves its GPUs' idle
draw (each GPU's SKU's, from the catalogue's power model, apps/inventory/gpu_power.py; the dynamic energy follows the
work, which stays the same); scaling out costs the same (a negative saving). Applying records the new replica count
on the service (the simulator then serves from that many nodes, each busier); a real cluster applies the downloadable
KEDA ScaledObject or HPA.
"""

import math
import shlex

from django.utils import timezone
from rest_framework import serializers

from apps.core.text import counted
from apps.costs import artefacts
from apps.costs.choices import ActionState, PolicyKind, PolicyScope
from apps.costs.policies.base import PolicyKindSpec, Proposal, StaleAction, register_policy_kind
from apps.inventory.gpu_power import gpu_power_model
from apps.inventory.models import Gpu
from apps.monitoring.telemetry import Window
from apps.workloads.choices import SERVICE_ACTIVE
from apps.workloads.models import InferenceService

MIN_STEP_S = 60.0
POINTS = 30
WHERE = "kubernetes"  # the commands run with kubectl against the cluster, not on a node


class ElasticScalingParameters(serializers.Serializer):
    threshold_up = serializers.FloatField(
        label="Scale out above",
        min_value=1.0,
        max_value=100.0,
        default=80.0,
        help_text="Scale out when the serving GPUs' utilisation stays above this all through the window (%); also "
        "the utilisation the new replica count aims for.",
    )
    threshold_down = serializers.FloatField(
        label="Scale in below",
        min_value=0.0,
        max_value=99.0,
        default=40.0,
        help_text="Scale in when utilisation stays below this all through the window (%).",
    )
    window_minutes = serializers.IntegerField(
        label="Window",
        min_value=1,
        max_value=1440,
        default=15,
        help_text="How long utilisation must stay above or below its threshold (minutes).",
        error_messages={"min_value": "A window of at least 1 minute."},
    )
    cool_down_minutes = serializers.IntegerField(
        label="Cool-down",
        min_value=0,
        max_value=1440,
        default=30,
        help_text="No scaling in sooner than this after the last scaling.",
    )
    min_replicas = serializers.IntegerField(label="Fewest replicas", min_value=1, max_value=1000, default=1)
    max_replicas = serializers.IntegerField(
        label="Most replicas",
        min_value=1,
        max_value=1000,
        required=False,
        help_text="At most the service's nodes; default: all of them.",
    )

    def validate(self, attrs):
        up, down = attrs["threshold_up"], attrs["threshold_down"]
        if down >= up:
            raise serializers.ValidationError(
                {"threshold_down": [f"Must be below threshold_up ({up:g} %), or the replicas would flap."]}
            )
        if attrs["min_replicas"] > attrs.get("max_replicas", attrs["min_replicas"]):
            raise serializers.ValidationError({"min_replicas": ["Must not be above max_replicas."]})
        return attrs


def _idle_w(hostnames: list[str]) -> float:
    """What the nodes' GPUs draw idle, each by its SKU's power model."""
    skus = Gpu.objects.filter(node__hostname__in=hostnames).values_list("sku__name", flat=True)
    return sum(gpu_power_model(sku).idle_w for sku in skus)


def _kubectl_scale(deployment: str, replicas: int) -> str:
    return shlex.join(["kubectl", "scale", f"deployment/{deployment}", f"--replicas={replicas}"])


@register_policy_kind
class ElasticScaling(PolicyKindSpec):
    name = PolicyKind.ELASTIC_SCALING
    label = "Elastic scaling"
    parameters = ElasticScalingParameters
    units = {"threshold_up": "%", "threshold_down": "%", "window_minutes": "min", "cool_down_minutes": "min"}
    scopes = (PolicyScope.SERVICE,)
    job_kind = None

    def check_target(self, parameters, *, policy):
        if policy.scope != PolicyScope.SERVICE or policy.service is None:
            raise serializers.ValidationError({"scope": ["Elastic scaling acts on one inference service."]})
        pool = policy.service.nodes.count()
        parameters.setdefault("max_replicas", max(pool, parameters["min_replicas"]))
        for field in ("min_replicas", "max_replicas"):
            if parameters[field] > pool:
                raise serializers.ValidationError(
                    {field: [f"{policy.service.name} has {counted(pool, 'node')}: at most {counted(pool, 'replica')}."]}
                )
        return parameters

    def last_scaled(self, policy) -> float | None:
        moments = [
            moment.timestamp()
            for applied, reverted in policy.actions.values_list("applied_at", "reverted_at")
            for moment in (applied, reverted)
            if moment is not None
        ]
        return max(moments, default=None)

    def step_means(self, source, hostnames: list[str], window: Window) -> list[float]:
        """Each step's mean utilisation over the GPUs of the nodes (steps without a value left out)."""
        per_step: dict[float, list[float]] = {}
        for series in source.gpu_series("util", hostnames=hostnames, window=window):
            for t, value in series.points:
                if not math.isnan(value):
                    per_step.setdefault(t, []).append(value)
        return [sum(values) / len(values) for _, values in sorted(per_step.items())]

    def propose(self, policy, *, source, now, exclude):
        parameters = policy.parameters
        service = InferenceService.objects.get(pk=policy.service_id)  # its replicas as they are now
        if service.state not in SERVICE_ACTIVE:
            return None, f"{service.name} is {service.get_state_display().lower()}"
        pool = sorted(node.hostname for node in service.nodes.all())
        serving = service.serving_hostnames()
        replicas = len(serving)
        span = 60.0 * parameters["window_minutes"]
        step = max(MIN_STEP_S, span / POINTS)
        window = Window(end=now, span=span, step=step, rate_range=step)
        means = self.step_means(source, serving, window)
        if not means:
            return None, f"{service.name}: no GPU telemetry over the window"
        mean, low, high = sum(means) / len(means), min(means), max(means)
        up, down = parameters["threshold_up"], parameters["threshold_down"]
        smallest, largest = parameters["min_replicas"], min(parameters.get("max_replicas", len(pool)), len(pool))
        minutes = parameters["window_minutes"]
        seen = f"{low:.0f}–{high:.0f} % busy over {minutes} min (mean {mean:.0f} %)"
        if low > up:
            direction, wanted = "out", min(largest, math.ceil(replicas * mean / up))
            if wanted <= replicas:
                return None, f"{service.name}: {seen}, above {up:g} %, but already at {replicas} of at most {largest}"
        elif high < down:
            last = self.last_scaled(policy)
            cool_down = 60.0 * parameters["cool_down_minutes"]
            if last is not None and now - last < cool_down:
                waited = max(0.0, now - last) / 60
                return None, (
                    f"{service.name}: {seen}, below {down:g} %, but it scaled {waited:.0f} min ago: scaling in waits "
                    f"for the {parameters['cool_down_minutes']} min cool-down"
                )
            direction, wanted = "in", max(smallest, math.ceil(replicas * high / up))
            if wanted >= replicas:
                return None, (
                    f"{service.name}: {seen}, below {down:g} %, but its peak needs {counted(replicas, 'replica')} "
                    f"(at least {smallest})"
                )
        else:
            return (
                None,
                f"{service.name}: {seen}, between {down:g} % and {up:g} %: keeps {counted(replicas, 'replica')}",
            )
        after = pool[:wanted]
        changed = sorted(set(serving) ^ set(after))
        idle_w = _idle_w(changed)
        saving_w = idle_w if direction == "in" else -idle_w
        row = {
            "service": service.name,
            "deployment": artefacts.k8s_name(service.name),
            "direction": direction,
            "replicas_before": replicas,
            "replicas_after": wanted,
            "replicas_field_before": service.replicas,
            "nodes_before": serving,
            "nodes_after": after,
            "changed_nodes": changed,
            "mean_util": round(mean, 1),
            "low_util": round(low, 1),
            "high_util": round(high, 1),
            "expected_util_after": round(mean * replicas / wanted, 1),
            "idle_power_w": round(idle_w, 1),
            "saving_w": round(saving_w, 1),
            "threshold_up": up,
            "threshold_down": down,
            "window_minutes": minutes,
            "cool_down_minutes": parameters["cool_down_minutes"],
            "min_replicas": smallest,
            "max_replicas": largest,
        }
        verb = "frees" if direction == "in" else "adds"
        reason = (
            f"{service.name} {seen}: scale {direction} {replicas} → {counted(wanted, 'replica')}; {verb} "
            f"{', '.join(changed)} ({idle_w:.0f} W idle)"
        )
        deployment = row["deployment"]
        return (
            Proposal(
                reason=reason,
                plan=[row],
                commands={WHERE: [_kubectl_scale(deployment, wanted)]},
                revert_commands={WHERE: [_kubectl_scale(deployment, replicas)]},
                window_seconds=int(span),
                expected_kwh_per_day=saving_w * 24 / 1000,
            ),
            "",
        )

    def guarded_hostnames(self, action):
        """Scaling in needs latency headroom on the service's nodes; scaling out is never held back by a burn."""
        row = action.plan[0]
        return row["nodes_before"] if row["direction"] == "in" else []

    def enact(self, action, *, mode):
        row = action.plan[0]
        service = InferenceService.objects.select_for_update().filter(name=row["service"]).first()
        if service is None:
            raise StaleAction(f"The service {row['service']} is gone.")
        serving = len(service.serving_hostnames())
        if mode == "apply":
            if serving != row["replicas_before"]:
                raise StaleAction(
                    f"{service.name} has {counted(serving, 'replica')} now, not {row['replicas_before']}: run a "
                    "new dry run."
                )
            service.replicas = row["replicas_after"]
            service.save()
            superseded = action.policy.actions.filter(state=ActionState.APPLIED).exclude(pk=action.pk)
            for older in superseded:
                older.state, older.reverted_at = ActionState.REVERTED, timezone.now()
                older.message = f"superseded: {service.name} scaled to {counted(row['replicas_after'], 'replica')}"
                older.save()
            return f"{service.name} scaled {row['direction']} to {counted(row['replicas_after'], 'replica')}"
        service.replicas = row["replicas_field_before"]
        service.save()
        return f"{service.name} back to {counted(row['replicas_before'], 'replica')}"

    def artefacts(self, action):
        row = action.plan[0]
        return artefacts.validated([artefacts.render_scaled_object(row), artefacts.render_hpa(row)])
