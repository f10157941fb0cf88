"""What the policy job kinds that act on nodes (power limits, storage tiering) share: a cell's commands joined into
its one result, and the end of an apply or a revert written on the policy action."""

from collections.abc import Callable

from django.db import transaction
from django.utils import timezone

from apps.core.text import counted
from apps.costs.choices import ActionState
from apps.costs.models import PolicyAction
from apps.jobs.choices import JobStatus
from apps.nodeexec.base import CommandResult

# The state an action is in while its job runs: a job that ends finds it there, or another job has since moved it.
RUNNING_STATE = {"apply": ActionState.APPLYING, "revert": ActionState.REVERTING}


def joined_results(results: list[CommandResult], stdout: bytes | None = None) -> CommandResult:
    """The cell's result of several commands: the first failure's exit code and error, every stderr, and `stdout`
    (every command's, when not given)."""
    failed = next((result for result in results if not result.ok), None)
    return CommandResult(
        exit_code=0 if failed is None else failed.exit_code,
        stdout=b"".join(result.stdout for result in results) if stdout is None else stdout,
        stderr=b"".join(result.stderr for result in results),
        error=failed.error if failed else "",
        timed_out=any(result.timed_out for result in results),
        canceled=any(result.canceled for result in results),
    )


def end_action(
    job,
    *,
    applied: str,
    reverted: str,
    revert_failed: str = "revert {status}: retry it",
    all_back: Callable[[PolicyAction], bool] = lambda action: True,
) -> None:
    """An apply or a revert job's end on its action: APPLIED or REVERTED when the job succeeded (a revert also only
    when `all_back`), else FAILED; an action no longer applying or reverting is left as it is. The messages are
    str.format templates: {status} the job's, {count} how many files the action's manifest holds, {files} the same
    with its noun ("1 file", "3 files")."""
    mode = job.parameters["mode"]
    with transaction.atomic():
        action = PolicyAction.objects.select_for_update().filter(public_id=job.parameters["action"]).first()
        if action is None or action.state != RUNNING_STATE.get(mode):
            return
        succeeded = job.status == JobStatus.SUCCEEDED
        now = timezone.now()
        if mode == "apply":
            action.state = ActionState.APPLIED if succeeded else ActionState.FAILED
            action.applied_at = now if succeeded else action.applied_at
            message = applied if succeeded else "apply {status}: revert it"
        else:
            back = succeeded and all_back(action)
            action.state = ActionState.REVERTED if back else ActionState.FAILED
            action.reverted_at = now if back else action.reverted_at
            message = reverted if back else revert_failed
        action.message = message.format(
            status=job.status, count=len(action.manifest), files=counted(len(action.manifest), "file")
        )
        action.save()
