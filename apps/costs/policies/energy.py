"""Policy 4, energy at low load: while a node's GPUs are busy less than `utilisation_below` % over the window, lower
their power limit to `power_limit_w` (nvidia-smi -i N -pl W, within the SKU's range); put the default (the TDP)
back when utilisation rises above `restore_above` %.

The expected saving comes from the telemetry of the window through each GPU's SKU power model in the catalogue
(apps/inventory/gpu_power.py, calibrated on the real H200 capture; the simulator draws by the same figures): a GPU
busy a share u of the time draws P = S + u·(F − S), S the static share, F its draw while busy at its clock. Under a
limit L < F the busy clock falls to r = ((L − S)/(F − S))^(1/e) of today's (dynamic power grows as f^e, e = 2.5 on the
H200), the same work keeps the GPU busy u/r of the time, and the draw becomes S + (u/r)(L − S) =
S + (P − S)·((L − S)/(F − S))^(1 − 1/e). So a GPU that is idle saves nothing (its draw is below S), and one that would
need more than all of its time at the lower clock keeps only r of its throughput: the proposal shows that share
(`throughput_factor`) for a GPU under full load.
"""

import math

from django.conf import settings
from rest_framework import serializers

from apps.core.text import counted
from apps.costs.commands import command_line, set_limit_argv
from apps.costs.policies.base import PolicyKindSpec, Proposal, register_policy_kind
from apps.inventory.gpu_power import gpu_power_model
from apps.inventory.models import Gpu
from apps.monitoring.telemetry import Window

JOB_KIND = "power-limit"
MIN_STEP_S = 60.0
POINTS = 30


class LowLoadPowerParameters(serializers.Serializer):
    utilisation_below = serializers.FloatField(
        label="Utilisation below",
        min_value=1.0,
        max_value=95.0,
        default=30.0,
        help_text="Lower the limit on a node whose GPUs' mean utilisation over the window is below this (%).",
    )
    restore_above = serializers.FloatField(
        label="Restore above",
        min_value=2.0,
        max_value=100.0,
        required=False,
        help_text="Put the default limit back when utilisation rises above this (%); default: 25 points above.",
    )
    window_minutes = serializers.IntegerField(
        label="Window",
        min_value=1,
        max_value=1440,
        default=30,
        help_text="How long utilisation must stay low (minutes).",
        error_messages={"min_value": "A window of at least 1 minute."},
    )
    power_limit_w = serializers.IntegerField(
        label="Power limit",
        min_value=1,
        max_value=5000,
        help_text="The lowered limit (W); within every scope SKU's min and max limit.",
    )

    def validate(self, attrs):
        below = attrs["utilisation_below"]
        attrs.setdefault("restore_above", min(100.0, below + 25.0))
        if attrs["restore_above"] <= below:
            raise serializers.ValidationError(
                {"restore_above": [f"Must be above utilisation_below ({below:g} %), or the limit would flap."]}
            )
        return attrs


def sku_ranges(nodes) -> dict[str, tuple[int, int]]:
    """SKU name -> (min, max) power limit of the scope's GPUs; the max is the default limit (the TDP)."""
    rows = Gpu.objects.filter(node__in=nodes).values_list("sku__name", "sku__min_power_limit_w", "sku__tdp_w")
    return {name: (min(low, high), high) for name, low, high in rows.distinct()}


@register_policy_kind
class LowLoadPower(PolicyKindSpec):
    name = "low_load_power"
    label = "Energy at low load"
    parameters = LowLoadPowerParameters
    units = {"utilisation_below": "%", "restore_above": "%", "window_minutes": "min", "power_limit_w": "W"}
    job_kind = JOB_KIND

    def check_scope(self, parameters, *, nodes):
        ranges = sku_ranges(nodes)
        watts = parameters["power_limit_w"]
        for sku, (low, high) in sorted(ranges.items()):
            if not low <= watts <= high:
                raise serializers.ValidationError(
                    {"power_limit_w": [f"{watts} W is outside the {sku}'s power limit range, {low}–{high} W."]}
                )
        return parameters

    def window(self, policy, now: float, minutes: float | None = None) -> Window:
        span = 60.0 * (minutes or policy.parameters["window_minutes"])
        step = max(MIN_STEP_S, span / POINTS)
        return Window(end=now, span=span, step=step, rate_range=step)

    def node_series(self, source, hostnames: list[str], window: Window) -> dict:
        """(hostname, gpu) -> {field: [values]} for utilisation, power and the limit in force."""
        per_gpu: dict = {}
        for field in ("util", "power", "power_limit"):
            for series in source.gpu_series(field, hostnames=hostnames, window=window):
                key = (series.labels.get("Hostname", ""), int(series.labels.get("gpu", "0") or 0))
                per_gpu.setdefault(key, {}).setdefault(field, []).extend(
                    value for value in series.values() if not math.isnan(value)
                )
        return per_gpu

    def propose(self, policy, *, source, now, exclude):
        parameters = policy.parameters
        watts, below = parameters["power_limit_w"], parameters["utilisation_below"]
        window = self.window(policy, now)
        nodes = list(policy.nodes().prefetch_related("gpus__sku"))
        hostnames = [node.hostname for node in nodes]
        samples = self.node_series(source, hostnames, window)
        plan, commands, reverts, notes = [], {}, {}, []
        worst_clock = 1.0
        for node in nodes:
            if node.hostname in exclude:
                notes.append(f"{node.hostname}: already under an action of this policy")
                continue
            gpus = sorted(node.gpus.all(), key=lambda gpu: gpu.index)
            util = [value for gpu in gpus for value in samples.get((node.hostname, gpu.index), {}).get("util", [])]
            if not util:
                notes.append(f"{node.hostname}: no telemetry over the window")
                continue
            mean_util = sum(util) / len(util)
            if mean_util >= below:
                notes.append(f"{node.hostname}: {mean_util:.0f} % busy, not below {below:g} %")
                continue
            rows = []
            for gpu in gpus:
                rows.append(self._gpu_row(node.hostname, gpu, samples.get((node.hostname, gpu.index), {}), watts))
            rows = [row for row in rows if row is not None]
            if not rows:
                notes.append(f"{node.hostname}: every GPU is at or below {watts} W already")
                continue
            if sum(row["saving_w"] for row in rows) <= 0:
                notes.append(
                    f"{node.hostname}: idle ({mean_util:.0f} % busy): a lower limit saves nothing until work comes"
                )
                continue
            plan.extend(rows)
            commands[node.hostname] = [command_line(set_limit_argv(row["gpu"], row["to_w"])) for row in rows]
            reverts[node.hostname] = [command_line(set_limit_argv(row["gpu"], row["default_w"])) for row in rows]
            worst_clock = min(worst_clock, *(row["full_load_clock"] for row in rows))
        if not plan:
            return None, "; ".join(notes) or "no node in scope"
        saving_w = sum(row["saving_w"] for row in plan)
        minutes = parameters["window_minutes"]
        reason = (
            f"{counted(len(commands), 'node')} below {below:g} % GPU utilisation over {minutes} min: "
            f"{counted(len(plan), 'GPU')} to {watts} W, saving {saving_w:.0f} W at this load"
        )
        return (
            Proposal(
                reason=reason,
                plan=plan,
                commands=commands,
                revert_commands=reverts,
                window_seconds=int(window.span),
                expected_kwh_per_day=saving_w * 24 / 1000,
                throughput_factor=round(worst_clock, 3),
                notes=notes,
            ),
            "",
        )

    def _gpu_row(self, hostname: str, gpu, series: dict, watts: int) -> dict | None:
        default = gpu.sku.tdp_w
        limits = series.get("power_limit") or [float(default)]
        current = limits[-1]
        if current <= watts:
            return None
        util, power = series.get("util", []), series.get("power", [])
        steps = list(zip(util, power, strict=False))
        board = gpu_power_model(gpu.sku.name)
        busy_full = min(float(current), float(default))  # a GEMM loop holds the limit in force
        saved, mean_power = 0.0, (sum(power) / len(power) if power else 0.0)
        for share, draw in steps:
            if share <= 0.5:
                continue
            busy_w = min(busy_full, board.busy_draw_w(mean_w=draw, busy_share=share / 100))
            after, _, _ = board.limited_draw(mean_w=draw, busy_w=busy_w, limit_w=watts)
            saved += draw - after
        saving = saved / len(steps) if steps else 0.0
        share = max(watts - board.static_w, 1.0) / max(busy_full - board.static_w, 1.0)
        clock = share ** (1 / board.dynamic_exponent)
        return {
            "hostname": hostname,
            "gpu": gpu.index,
            "sku": gpu.sku.name,
            "from_w": round(current),
            "to_w": int(watts),
            "default_w": default,
            "mean_util": round(sum(util) / len(util), 1) if util else 0.0,
            "mean_power_w": round(mean_power, 1),
            "saving_w": round(saving, 2),
            "full_load_clock": round(min(1.0, clock), 3),
        }

    def undo_reason(self, policy, action, *, source, now):
        above = policy.parameters.get("restore_above", 100.0)
        minutes = max(1.0, settings.RACKPILOT_POLICY_EVALUATION_SECONDS / 60)
        window = self.window(policy, now, minutes=minutes)
        samples = self.node_series(source, action.hostnames, window)
        for hostname in action.hostnames:
            util = [
                value for (host, _), fields in samples.items() if host == hostname for value in fields.get("util", [])
            ]
            if util and sum(util) / len(util) > above:
                return f"load rose: {hostname} {sum(util) / len(util):.0f} % busy (above {above:g} %)"
        return ""

    def job_parameters(self, action, *, mode):
        return {"action": str(action.public_id), "mode": mode}
