"""Policy 2, spot (preemptible) capacity: workloads of class preemptible (apps.workloads, WorkloadClass) go to spot
nodes, tainted so nothing else lands there, under a priority class that never preempts others (critical work gets
one that may evict them). The dry run lists the active preemptible training jobs and services in scope and their
nodes; a node that also carries a standard or critical workload is left out (tainting it would move that work).

The saving model: the nodes' GPU energy over the window (their energy counters), per day, times `spot_discount`:
the share of that energy's cost a spot-priced (preemptible, reclaimable) placement no longer pays for. Money is
that at RACKPILOT_ENERGY_PRICE_PER_KWH. Applying records the spot placement on the action (its nodes count as spot
capacity until it is reverted); a real cluster applies the downloadable PriorityClasses, node taints, pod placement
patches, or the Slurm partition and QOS.
"""

import json
import shlex

from rest_framework import serializers

from apps.core.text import counted
from apps.costs import artefacts
from apps.costs.choices import ACTION_IN_FORCE, PolicyKind
from apps.costs.policies.base import PolicyKindSpec, Proposal, register_policy_kind
from apps.monitoring.telemetry import JOULES_PER_KWH
from apps.workloads.choices import WorkloadClass
from apps.workloads.models import InferenceService, TrainingJob

WHERE = "kubernetes"


class SpotCapacityParameters(serializers.Serializer):
    spot_discount = serializers.FloatField(
        label="Spot discount",
        min_value=0.01,
        max_value=0.95,
        default=0.6,
        help_text="Share of the energy cost a spot placement saves (0.6: spot capacity costs 40 % of on-demand).",
    )
    window_minutes = serializers.IntegerField(
        label="Window",
        min_value=1,
        max_value=1440,
        default=60,
        help_text="The telemetry window the nodes' energy is measured over (minutes).",
        error_messages={"min_value": "A window of at least 1 minute."},
    )


def _taint_argv(hostname: str, *, remove: bool) -> list[str]:
    taint = f"{artefacts.SPOT_TAINT}=true:NoSchedule" + ("-" if remove else "")
    return ["kubectl", "taint", "nodes", hostname, taint, *([] if remove else ["--overwrite"])]


def _label_argv(hostname: str, *, remove: bool) -> list[str]:
    label = f"{artefacts.CAPACITY_LABEL}-" if remove else f"{artefacts.CAPACITY_LABEL}=spot"
    return ["kubectl", "label", "nodes", hostname, label, *([] if remove else ["--overwrite"])]


@register_policy_kind
class SpotCapacity(PolicyKindSpec):
    name = PolicyKind.SPOT_CAPACITY
    label = "Spot capacity"
    parameters = SpotCapacityParameters
    units = {"window_minutes": "min"}
    job_kind = None

    def workloads(self, nodes) -> list[tuple[str, object, list[str]]]:
        """(kind, workload, its host names in scope) for every active workload on the scope's nodes."""
        hostnames = {node.hostname for node in nodes}
        found = []
        for job in TrainingJob.objects.active().prefetch_related("members__node"):
            found.append(("training", job, sorted({m.node.hostname for m in job.members.all()} & hostnames)))
        for service in InferenceService.objects.active().prefetch_related("nodes"):
            found.append(("service", service, sorted({node.hostname for node in service.nodes.all()} & hostnames)))
        return [(kind, workload, hosts) for kind, workload, hosts in found if hosts]

    def spot_hostnames(self, policy) -> set[str]:
        return {
            host
            for action in policy.actions.filter(state__in=ACTION_IN_FORCE)
            for row in action.plan
            for host in row["hostnames"]
        }

    def propose(self, policy, *, source, now, exclude):
        parameters = policy.parameters
        span = 60.0 * parameters["window_minutes"]
        running = self.workloads(list(policy.nodes()))
        others = {
            host
            for _, workload, hosts in running
            if workload.workload_class != WorkloadClass.PREEMPTIBLE
            for host in hosts
        }
        already = self.spot_hostnames(policy)
        plan, notes = [], []
        for kind, workload, hosts in running:
            if workload.workload_class != WorkloadClass.PREEMPTIBLE:
                continue
            shared = sorted(set(hosts) & others)
            if shared:
                notes.append(f"{workload.name}: {', '.join(shared)} also run standard or critical work")
            placed = sorted(set(hosts) - others)
            if placed and set(placed) <= already:
                notes.append(f"{workload.name}: already on spot capacity")
                continue
            if not placed:
                continue
            joules = source.energy_joules(hostnames=placed, start=now - span, end=now)
            kwh_per_day = joules / JOULES_PER_KWH * 86400 / span
            plan.append(
                {
                    "workload": workload.name,
                    "workload_kind": kind,
                    "deployment": artefacts.k8s_name(workload.name),
                    "hostnames": placed,
                    "energy_kwh_per_day": round(kwh_per_day, 3),
                    "saving_kwh_per_day": round(kwh_per_day * parameters["spot_discount"], 3),
                    "spot_discount": parameters["spot_discount"],
                }
            )
        if not plan:
            return None, "; ".join(notes) or "no active preemptible workload in scope"
        hosts = sorted({host for row in plan for host in row["hostnames"]})
        commands = [shlex.join(["kubectl", "apply", "-f", "priority-classes.yaml"])]
        reverts = []
        for host in hosts:
            commands += [shlex.join(_taint_argv(host, remove=False)), shlex.join(_label_argv(host, remove=False))]
            reverts += [shlex.join(_taint_argv(host, remove=True)), shlex.join(_label_argv(host, remove=True))]
        for row in plan:
            if row["workload_kind"] == "service":
                patch = json.dumps(artefacts.placement_patch(row)["spec"], separators=(",", ":"))
                commands.append(shlex.join(["kubectl", "patch", f"deployment/{row['deployment']}", "-p", patch]))
            else:
                notes.append(f"{row['workload']}: give its pod template the placement at its next launch")
        saving = sum(row["saving_kwh_per_day"] for row in plan)
        reason = (
            f"{counted(len(plan), 'preemptible workload')} to spot capacity on {counted(len(hosts), 'node')}: "
            f"{', '.join(row['workload'] for row in plan)}; {saving:.1f} kWh/day at a "
            f"{100 * parameters['spot_discount']:.0f} % spot discount"
        )
        return (
            Proposal(
                reason=reason,
                plan=plan,
                commands={WHERE: commands},
                revert_commands={WHERE: reverts},
                window_seconds=int(span),
                expected_kwh_per_day=saving,
                notes=notes,
            ),
            "",
        )

    def guarded_hostnames(self, action):
        return []  # the workloads stay where they run: no clock or replica changes to guard

    def enact(self, action, *, mode):
        hosts = sorted({host for row in action.plan for host in row["hostnames"]})
        names = ", ".join(row["workload"] for row in action.plan)
        if mode == "apply":
            return f"{', '.join(hosts)} are spot capacity for {names}"
        return f"{', '.join(hosts)} are on-demand capacity again"

    def artefacts(self, action):
        plan = action.plan
        return artefacts.validated(
            [
                artefacts.render_priority_classes(plan),
                artefacts.render_spot_nodes(plan),
                artefacts.render_pod_placement(plan),
                artefacts.render_slurm(plan),
            ]
        )
