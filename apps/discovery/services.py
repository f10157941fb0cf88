"""Discovery services: start a discovery, record what a shard's nodes reported, accept or dismiss differences.

Views, API actions and the job kind call these; none takes a request.
"""

import logging
from dataclasses import dataclass

from django.core.exceptions import ObjectDoesNotExist, ValidationError
from django.db import transaction
from django.db.models import Count, Q
from django.utils import timezone

from apps.core.audit import audit_context
from apps.core.choices import ChangeSource
from apps.core.text import counted
from apps.deployments import services as deployment_services
from apps.discovery import reconcile
from apps.discovery.choices import DifferenceState, FactFamily
from apps.discovery.facts import read, split_step
from apps.discovery.models import Difference, NodeFacts
from apps.inventory.choices import NicPurpose
from apps.inventory.models import Nic, Node
from apps.jobs import services as job_services
from apps.jobs.choices import EventLevel
from apps.jobs.events import emit
from apps.jobs.models import Job, JobShard, JobStep
from apps.nodeexec.catalogue import MAX_INTERFACES
from apps.parsers.errors import ParseError

logger = logging.getLogger(__name__)

KIND = "discover"


class DecisionError(Exception):
    """A difference that cannot be decided (already decided, or the inventory refused the value)."""


class InventoryObjectGone(DecisionError):
    """The GPU, NIC or volume the difference is about was deleted from the inventory since discovery."""


def data_interfaces(*, nodes: list[Node] | None) -> list[str]:
    """Data NIC names of these nodes (of the whole inventory when None), sorted, at most 16."""
    nics = Nic.objects.filter(purpose=NicPurpose.DATA)
    if nodes is not None:
        nics = nics.filter(node__in=nodes)
    return sorted(set(nics.values_list("name", flat=True)))[:MAX_INTERFACES]


def start_discovery(
    *,
    targets: job_services.TargetSpec,
    transport: str | None = None,
    requested_by=None,
    interfaces: list[str] | None = None,
    queue: bool = True,
) -> Job:
    """A discover job over the targets, reading the given data NICs (default: those the inventory lists for these
    nodes). queue=False: the caller runs the shards (see create_job)."""
    if interfaces is None:
        interfaces = data_interfaces(nodes=job_services.resolve_targets(targets))
    return job_services.create_job(
        kind=KIND,
        targets=targets,
        parameters={"interfaces": interfaces},
        transport=transport,
        requested_by=requested_by,
        queue=queue,
    )


# --- recording a shard's results ------------------------------------------------------------------------------


@dataclass
class _NodeOutputs:
    node_facts: dict
    nic_facts: dict
    could_not_run: dict
    not_on_node: list


def record_shard(*, job: Job, shard: JobShard) -> None:
    """Parse every node's outputs, reconcile with the inventory, store the snapshot and the differences."""
    cells = (
        JobStep.objects.filter(shard=shard, node__isnull=False)
        .prefetch_related("artifacts")
        .order_by("hostname", "position")
    )
    by_node: dict[int, list[JobStep]] = {}
    for cell in cells:
        by_node.setdefault(cell.node_id, []).append(cell)
    nodes = Node.objects.filter(pk__in=by_node).prefetch_related("gpus", "nics__peer_gpus", "firmware", "volumes__tier")
    for node in nodes:
        try:
            record_node(job=job, node=node, cells=by_node[node.pk])
        except Exception:  # one node's surprise must not lose the others' results
            logger.exception("discovery of %s: could not record its results", node.hostname)
            emit(
                job,
                "could not record the discovery results (see the server log)",
                level=EventLevel.ERROR,
                hostname=node.hostname,
            )


def _outputs(cells: list[JobStep]) -> _NodeOutputs:
    out = _NodeOutputs({}, {}, {}, [])
    for cell in cells:
        if cell.exit_code != 0:  # the command did not run to the end: its cell summary says why
            out.could_not_run[cell.step] = (cell.summary or cell.status).removeprefix("could not run: ")
            continue
        stdout = next((a.text() for a in cell.artifacts.all() if a.stream == "stdout"), "")
        try:
            reading = read(cell.step, stdout)
        except ParseError as error:
            out.could_not_run[cell.step] = f"output not understood ({error})"
            continue
        if reading.family == FactFamily.NICS:
            for interface, parts in reading.facts["interfaces"].items():
                for part, facts in parts.items():
                    out.nic_facts.setdefault(part, {})[interface] = facts
            out.could_not_run.update(reading.facts["could_not_run"])
            out.not_on_node = reading.facts["absent"]
        else:
            out.node_facts[reading.family] = reading.facts
    return out


def record_node(*, job: Job, node: Node, cells: list[JobStep]) -> NodeFacts:
    out = _outputs(cells)
    comparison = reconcile.compare(node, out.node_facts, out.nic_facts, out.could_not_run)
    now = timezone.now()
    filled = differences = 0
    with transaction.atomic(), audit_context(source=ChangeSource.JOB, user=job.requested_by, job=job):
        facts = dict(out.node_facts)
        if out.nic_facts:
            facts["interfaces"] = out.nic_facts
        facts["reconciled"] = comparison.summary
        snapshot = NodeFacts.objects.create(
            job=job, node=node, facts=facts, could_not_run=comparison.could_not_run, notes=comparison.notes
        )
        Difference.objects.filter(node=node, state=DifferenceState.OPEN).exclude(job=job).update(
            state=DifferenceState.SUPERSEDED, decided_at=now, updated=now
        )
        for finding in comparison.findings:
            state, note = DifferenceState.OPEN, finding.note
            if finding.fill:
                try:
                    reconcile.apply(node, finding.object_type, finding.object_key, finding.field, finding.discovered)
                    state = DifferenceState.FILLED
                except (ValidationError, reconcile.NotApplicable) as error:
                    note = f"could not fill in: {_message(error)}"
            Difference.objects.create(
                job=job,
                node=node,
                object_type=finding.object_type,
                object_key=finding.object_key,
                field=finding.field,
                expected=finding.expected[:255],
                discovered=finding.discovered[:255],
                note=note[:300],
                state=state,
                decided_at=now if state == DifferenceState.FILLED else None,
            )
            filled += state == DifferenceState.FILLED
            differences += state == DifferenceState.OPEN
    _report(job, node, out, comparison, differences, filled)
    return snapshot


def _report(job, node, out: _NodeOutputs, comparison, differences: int, filled: int) -> None:
    for key, reason in sorted(comparison.could_not_run.items()):
        emit(
            job,
            f"{key}: could not run — {reason}",
            level=EventLevel.WARNING,
            hostname=node.hostname,
            step=_column(key),
            data={"could_not_run": reason},
        )
    for note in comparison.notes:
        emit(job, note, level=EventLevel.WARNING, hostname=node.hostname)
    if out.not_on_node:
        emit(job, f"not on this node: {', '.join(out.not_on_node)}", hostname=node.hostname, step=FactFamily.NICS)
    emit(
        job,
        f"discovery: {counted(differences, 'difference')} to decide, {counted(filled, 'fact')} filled in, "
        f"{counted(len(comparison.could_not_run), 'fact family', 'fact families')} could not run",
        level=EventLevel.WARNING if differences or comparison.could_not_run else EventLevel.INFO,
        hostname=node.hostname,
        data={"differences": differences, "filled": filled, "could_not_run": sorted(comparison.could_not_run)},
    )


def _column(key: str) -> str:
    """The matrix column a could-not-run key belongs to ("qos:ens1np0" is the nics column; "affinity" is none)."""
    family, interface = split_step(key)
    if interface:
        return FactFamily.NICS
    return family if family in FactFamily.values else ""


def _message(error: Exception) -> str:
    if isinstance(error, ValidationError):
        return (
            "; ".join(f"{k}: {' '.join(v)}" for k, v in error.message_dict.items())
            if hasattr(error, "error_dict")
            else " ".join(error.messages)
        )
    if isinstance(error, reconcile.NotApplicable):
        return "the inventory has no field for it"
    return str(error)


# --- decisions --------------------------------------------------------------------------------------------------


def accept_difference(*, difference: Difference, user, source: str = ChangeSource.UI) -> Difference:
    """Make the inventory say what was discovered (audited as the user), and close the difference."""
    with transaction.atomic(), audit_context(source=source, user=user):
        current = Difference.objects.select_for_update().select_related("node").get(pk=difference.pk)
        if current.state != DifferenceState.OPEN:
            raise DecisionError(f"This difference is already {current.get_state_display().lower()}.")
        try:
            reconcile.apply(current.node, current.object_type, current.object_key, current.field, current.discovered)
        except reconcile.NotApplicable:
            pass  # acknowledged: nothing in the inventory records it
        except ValidationError as error:
            raise DecisionError(f"The inventory refused {current.discovered!r}: {_message(error)}") from None
        except ObjectDoesNotExist:
            raise InventoryObjectGone(
                f"{current.node.hostname} has no {current.get_object_type_display()} {current.object_key} in the "
                "inventory any more (it was deleted after discovery): dismiss this difference, or discover again."
            ) from None
        current.state, current.decided_by, current.decided_at = DifferenceState.ACCEPTED, user, timezone.now()
        current.save(update_fields=["state", "decided_by", "decided_at", "updated"])
    return current


def fix_node(*, difference: Difference, user):
    """The node is wrong, the inventory right: leave the inventory as it is (the difference is dismissed) and start
    a remediation, a deployment over the node that applies the one plan step putting this right, approved by the
    user as a deployment's steps are (deployments.services.remediate). Returns its run."""
    step = difference.node_fix_step
    if not step:
        raise DecisionError(
            f"No deployment step sets {difference.field} on a node: fix it by hand, or update the inventory."
        )
    with transaction.atomic():
        current = Difference.objects.select_for_update().select_related("node", "job").get(pk=difference.pk)
        if current.state != DifferenceState.OPEN:
            raise DecisionError(f"This difference is already {current.get_state_display().lower()}.")
        try:
            run = deployment_services.remediate(
                hostname=current.node.hostname,
                step=step,
                user=user,
                transport=current.job.transport,
                reason=f"Discovery found {current}; the inventory is right, so the node is put right.",
            )
        except deployment_services.DeploymentError as error:
            raise DecisionError(_detail(error.detail)) from None
        current.state, current.decided_by, current.decided_at = DifferenceState.DISMISSED, user, timezone.now()
        current.save(update_fields=["state", "decided_by", "decided_at", "updated"])
    return run


def _detail(detail) -> str:
    if isinstance(detail, dict):
        return "; ".join(f"{key}: {_detail(value)}" for key, value in detail.items())
    if isinstance(detail, list | tuple):
        return " ".join(_detail(item) for item in detail)
    return str(detail)


def dismiss_difference(*, difference: Difference, user) -> Difference:
    """Leave the inventory as it is (the node is what is wrong, or it does not matter), and close the difference."""
    with transaction.atomic():
        updated = Difference.objects.filter(pk=difference.pk, state=DifferenceState.OPEN).update(
            state=DifferenceState.DISMISSED, decided_by=user, decided_at=timezone.now(), updated=timezone.now()
        )
        current = Difference.objects.select_related("node").get(pk=difference.pk)
    if not updated:
        raise DecisionError(f"This difference is already {current.get_state_display().lower()}.")
    return current


def accept_all(*, job: Job, node: Node, user, source: str = ChangeSource.UI) -> tuple[int, list[str]]:
    """Accept every open difference of the node in this job; returns (accepted, problems)."""
    accepted, problems = 0, []
    for difference in Difference.objects.open().filter(job=job, node=node).select_related("node"):
        try:
            accept_difference(difference=difference, user=user, source=source)
            accepted += 1
        except DecisionError as error:
            problems.append(f"{difference}: {error}")
    return accepted, problems


def discovery_jobs():
    """Discovery jobs, newest first, with their open / filled difference counts."""
    return (
        Job.objects.filter(kind=KIND)
        .select_related("requested_by")
        .annotate(
            open_count=Count("discovery_differences", filter=Q(discovery_differences__state=DifferenceState.OPEN)),
            filled_count=Count("discovery_differences", filter=Q(discovery_differences__state=DifferenceState.FILLED)),
        )
        .order_by("-created", "-id")
    )
