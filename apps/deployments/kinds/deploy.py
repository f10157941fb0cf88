"""The `deploy` job kind: one matrix column per plan step; each cell checks, applies only what the check found
wrong (disruptive steps only where approved), verifies, and reports verdicts and suggestions with its finished event
(pushed live). A node whose earlier phase failed skips later phases; a resume skips what an earlier run verified.
"""

import asyncio
import logging

from rest_framework import serializers

from apps.core.text import counted
from apps.core.threads import thread_connection_returned
from apps.deployments import (
    commands,  # noqa: F401  (registers the catalogue entries the steps run)
    recording,
)
from apps.deployments.choices import VERIFIED_OUTCOMES, Outcome, Phase
from apps.deployments.context import node_contexts
from apps.deployments.kinds.reboot import NodeWaits, RebootKind, reboot_and_reconnect
from apps.deployments.recording import Cell
from apps.deployments.steps import PLAN, STEPS
from apps.deployments.steps.base import Call, CouldNotRun, Finding, NodeContext, Output, Step, worst
from apps.deployments.suggestions import suggestions_for
from apps.jobs.choices import StepStatus
from apps.jobs.kinds import CellRecord, JobKind, StepSpec, register_kind
from apps.nodeexec.base import CommandResult, NodeTarget
from apps.nodeexec.fanout import wait_unless_canceled

KIND = "deploy"
logger = logging.getLogger(__name__)


class DeployParameters(serializers.Serializer):
    deployment = serializers.UUIDField(help_text="The deployment whose plan this job runs.")
    run = serializers.IntegerField(min_value=1, help_text="The run's number within the deployment.")
    check_only = serializers.BooleanField(
        default=False, help_text="Only read and judge: apply nothing (an audit of nodes already in production)."
    )
    apply_only = serializers.ListField(
        child=serializers.ChoiceField(choices=[step.name for step in PLAN]),
        default=list,
        help_text="Apply the fixes of these steps only, and only read and judge the others (a remediation); "
        "empty: every step's.",
    )

    def validate_deployment(self, value):
        from apps.deployments.models import Deployment

        if not Deployment.objects.filter(public_id=value).exists():
            raise serializers.ValidationError("No deployment has this id.")
        return value


@register_kind
class Deploy(JobKind):
    name = KIND
    label = "Deploy"
    started_through = "a deployment (POST /api/deployments/{id}/start/ or resume/, with its approvals)"
    description = "Runs a deployment's plan (check, apply, verify per step) and records acceptance verdicts."
    parameters = DeployParameters
    transports = ("ssh", "sim")

    def __init__(self):
        self.contexts: dict[str, NodeContext] = {}
        self.verified: dict[tuple[str, str], int] = {}
        self.approved: set[tuple[str, str]] = set()
        self.cells: dict[tuple[str, str], Cell] = {}  # (hostname, step name), filled by the step runner
        self.failed_phase: dict[str, int] = {}
        self.check_only = False
        self.apply_only: set[str] = set()
        self.run = None
        self.waits: NodeWaits | None = None

    def steps(self, parameters: dict) -> list[StepSpec]:
        return [
            StepSpec(name=step.name, command="", label=f"{step.phase}. {step.label}", stop_on_failure=False)
            for step in PLAN
        ]

    def prepare(self, job, shard) -> None:
        deployment, run = recording.run_of(job)
        self.run = run
        self.check_only = bool(job.parameters.get("check_only"))
        self.apply_only = set(job.parameters.get("apply_only") or [])
        node_ids = shard.steps.values_list("node_id", flat=True).distinct()
        self.contexts = node_contexts(deployment, list(node_ids))
        self.verified = recording.verified_cells(deployment, before=run)
        self.approved = recording.approved_cells(deployment)
        self.waits = NodeWaits(job.transport, RebootKind.validate({}))  # a fix's reboot: the reboot kind's defaults

    def step_runner(self, spec: StepSpec):
        step = STEPS[spec.name]

        async def runner(target, run) -> CommandResult:
            return await self._run_cell(step, self.contexts[target.hostname], run, target)

        return runner

    async def _run_cell(self, step: Step, node: NodeContext, run, target: NodeTarget) -> CommandResult:
        key = (node.hostname, step.name)
        cell = self.cells[key] = Cell()
        transcript: list[str] = []
        skip = self._skip_reason(step, node)
        if skip:
            cell.status, cell.summary, cell.record = StepStatus.SKIPPED, skip, False
            return CommandResult(exit_code=0)
        findings, canceled = await self._judge(step, node, run, transcript)
        if canceled:
            cell.status, cell.summary, cell.record = StepStatus.CANCELED, "canceled", False
            return _result(transcript, canceled=True)
        done_before = all(finding.passed for finding in findings)
        fixes = [] if done_before else step.fixes(node, findings)
        check_only = self._check_only(step)
        needs_approval = bool(fixes) and step.disruptive and key not in self.approved and not check_only
        can_fix = (
            fixes
            and not needs_approval
            and not check_only
            and all(f.outcome != Outcome.COULD_NOT_RUN for f in findings)
        )
        if can_fix:
            applied_ok = await self._apply(fixes, run, transcript, cell)
            reboot_problem = ""  # what went wrong with the reboot the fix needs, if anything
            if applied_ok and step.reboot_after_fix:
                reboot_problem = await reboot_and_reconnect(target, run, self.waits, transcript)
                cell.rebooted = not reboot_problem
            if applied_ok and not reboot_problem:
                findings, canceled = await self._judge(step, node, run, transcript)
                if canceled:
                    cell.status, cell.summary = StepStatus.CANCELED, "canceled"
                    return _result(transcript, canceled=True)
            else:
                findings.append(
                    Finding(
                        check=step.name,
                        outcome=Outcome.COULD_NOT_RUN,
                        criterion="the node reboots and comes back" if applied_ok else "apply succeeds",
                        value=reboot_problem[:120] if applied_ok else "apply failed",
                        evidence="\n".join(transcript[-6:]),
                    )
                )
        cell.findings = findings
        outcome = worst(findings)
        if outcome in (Outcome.FAIL, Outcome.COULD_NOT_RUN):
            self.failed_phase[node.hostname] = min(self.failed_phase.get(node.hostname, 99), step.phase)
            open_fixes = step.fixes(node, findings) if needs_approval or not can_fix else []
            cell.suggestions = suggestions_for(
                hostname=node.hostname, step=step, node=node, findings=findings, fixes=open_fixes
            )
        cell.status, cell.summary = self._status(step, findings, done_before, needs_approval, cell, fixes)
        await asyncio.to_thread(self._store, node, step.name, cell)
        return _result(transcript, exit_code=0 if outcome in VERIFIED_OUTCOMES else 1)

    def _check_only(self, step: Step) -> bool:
        """Read and judge only: the whole run says so, or a remediation's run for a step it does not fix."""
        return self.check_only or bool(self.apply_only and step.name not in self.apply_only)

    def _store(self, node: NodeContext, step: str, cell: Cell) -> None:
        with thread_connection_returned():
            ids = recording.record_cell(
                run=self.run, node_id=node.node_id, hostname=node.hostname, step=step, cell=cell
            )
        for item, public_id in zip(cell.suggestions, ids, strict=True):
            item["id"] = public_id  # pushed with the cell's event, so the page can act on it at once

    def _skip_reason(self, step: Step, node: NodeContext) -> str:
        if not step.applies_to(node):
            return "not applicable to this node"
        run_number = self.verified.get((node.hostname, step.name))
        if run_number:
            return f"verified in run {run_number}"
        failed = self.failed_phase.get(node.hostname)
        if failed is not None and failed < step.phase:
            return f"not run: phase {failed} ({Phase(failed).label}) failed on this node"
        return ""

    async def _judge(self, step: Step, node: NodeContext, run, transcript: list[str]):
        """Read and judge; a failing measurement is retried after the criterion's cool-down."""
        criterion = node.criteria.get(step.retry_check, {}) if step.retry_check else {}
        tries = 1 + int(criterion.get("retries") or 0)
        findings: list[Finding] = []
        for attempt in range(1, tries + 1):
            outputs = {}
            for read in step.reads(node):
                result = await run(read.argv(), read.timeout())
                if result.canceled:
                    return [], True
                outputs[read.key] = _output(read, result)
                transcript.append(_transcript(read, result))
            try:
                findings = step.judge(node, outputs)
            except CouldNotRun as reason:
                findings = [step.could_not_run(str(reason))]
            except Exception as error:  # a judgement bug must not stop the other nodes' cells
                logger.exception("deploy step %s on %s: judging failed", step.name, node.hostname)
                findings = [step.could_not_run(f"internal error judging the output: {error!r}")]
            findings = findings or [step.could_not_run("nothing to judge in the output")]
            for finding in findings:
                finding.attempts = attempt
            failing = [finding.check for finding in findings if finding.outcome == Outcome.FAIL]
            # Only a noisy measurement is worth another try; a wrong setting stays wrong.
            if not failing or attempt == tries or set(failing) != {step.retry_check}:
                break
            cooldown = float(criterion.get("cooldown_seconds") or 0)
            transcript.append(f"# {step.label}: below the criterion on try {attempt}; retrying in {cooldown:g} s")
            if await wait_unless_canceled(cooldown):
                return [], True
        return findings, False

    async def _apply(self, fixes: list[Call], run, transcript: list[str], cell: Cell) -> bool:
        for fix in fixes:
            result = await run(fix.argv(), fix.timeout())
            transcript.append(_transcript(fix, result))
            cell.applied.append(fix.text())
            if not result.ok:
                return False
        return True

    def _status(self, step, findings, done_before, needs_approval, cell, fixes) -> tuple[str, str]:
        outcome = worst(findings)
        failing = [f for f in findings if f.outcome in (Outcome.FAIL, Outcome.COULD_NOT_RUN)]
        if outcome == Outcome.COULD_NOT_RUN and not [f for f in failing if f.outcome == Outcome.FAIL]:
            return StepStatus.ERROR, ("could not run: " + failing[0].value)[:300]
        if failing:
            first = failing[0]
            where = f"{first.subject}: " if first.subject else ""
            text = f"{where}{first.value} (criterion: {first.criterion})"
            if needs_approval:
                text = f"needs approval to fix — {text}"
            elif self._check_only(step) and fixes:
                text = f"check only, not applied — {text}"
            more = f" and {len(failing) - 1} more" if len(failing) > 1 else ""
            return StepStatus.FAILED, (text + more)[:300]
        note = " (with warnings)" if outcome == Outcome.WARN else ""
        if done_before and not step.acceptance:
            return StepStatus.SKIPPED, f"already done: {_passed_summary(findings)}{note}"[:300]
        if cell.applied:
            after = " after a reboot" if cell.rebooted else ""
            return StepStatus.SUCCEEDED, f"applied {counted(len(cell.applied), 'change')}, verified{after}{note}"[:300]
        return StepStatus.SUCCEEDED, f"{_passed_summary(findings)}{note}"[:300]

    def cell_record(self, target: NodeTarget, step: StepSpec, result: CommandResult) -> CellRecord:
        cell = self.cells.get((target.hostname, step.name))
        if cell is None:  # the runner never reached the cell (the transport failed first): the engine's default
            return super().cell_record(target, step, result)
        data = {}
        if cell.record:
            data = {
                "verdicts": [finding.as_json() for finding in cell.findings],
                "suggestions": cell.suggestions,
                "outcome": worst(cell.findings),
            }
        return CellRecord(cell.status, cell.summary, data)

    def shard_finished(self, job, shard) -> None:
        recording.record_shard(job=job, hostnames={hostname for hostname, _ in self.cells})

    def job_finished(self, job) -> None:
        recording.settle_state(recording.run_of(job)[0])


def _result(transcript: list[str], *, exit_code: int | None = None, canceled: bool = False) -> CommandResult:
    """The cell's result: its commands and their outputs, one after the other (kept as the cell's artifact)."""
    stdout = ("\n".join(transcript) + "\n").encode() if transcript else b""
    return CommandResult(exit_code=exit_code, stdout=stdout, stdout_size=len(stdout), canceled=canceled)


def _output(read: Call, result: CommandResult) -> Output:
    text = result.stdout.decode("utf-8", errors="replace")
    if result.ok:
        return Output(True, text)
    stderr = result.stderr.decode("utf-8", errors="replace").strip()
    if result.timed_out:
        reason = f"{read.argv()[0]} timed out after {read.timeout():g} s"
    elif result.exit_code == 127:
        reason = f"{read.argv()[0]} is not installed (not found on the node)"
    elif result.error:
        reason = result.error
    else:
        reason = f"{read.argv()[0]} exited {result.exit_code}" + (f": {stderr.splitlines()[-1]}" if stderr else "")
    return Output(False, text + ("\n" + stderr if stderr else ""), reason[:300])


def _transcript(read: Call, result: CommandResult) -> str:
    text = result.stdout.decode("utf-8", errors="replace").rstrip()
    stderr = result.stderr.decode("utf-8", errors="replace").rstrip()
    status = "" if result.ok else f"\n# exit {result.exit_code}{' (timed out)' if result.timed_out else ''}"
    return f"$ {read.text()}\n{text}" + (f"\n{stderr}" if stderr else "") + status


def _passed_summary(findings: list[Finding]) -> str:
    values = [f"{f.subject + ' ' if f.subject else ''}{f.value}" for f in findings if f.value][:3]
    more = f" (+{len(findings) - 3})" if len(findings) > 3 else ""
    return "; ".join(values) + more
