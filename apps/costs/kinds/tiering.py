"""The `storage-tiering` job kind, on the one node that mounts both tiers:

- survey: find the files unread for N days, and lsof what is open under the directory (read-only); when it succeeds
  the policy's proposal is recorded from its output (apps/costs/policies/tiering.py);
- apply: check what is open now (lsof), then per file of the approved plan: mkdir -p its directory, mv -n -T, read
  the moved file back (its size must match); what moved is the action's manifest. A file already at its destination
  with its size (an earlier try of the same run) counts as moved, so running it again moves nothing twice;
- revert: the same, back, for every file of the manifest (a file back where it was leaves the manifest).
A file opened since the proposal, or not where the plan says any more, is left and named."""

from django.db import transaction
from rest_framework import serializers

from apps.core.text import counted
from apps.costs.choices import PolicyKind
from apps.costs.kinds.actions import end_action, joined_results
from apps.costs.models import CostPolicy, PolicyAction
from apps.costs.policies.base import record_proposal
from apps.costs.policies.tiering import JOB_KIND
from apps.costs.tiering_commands import (
    FIND_IDLE,
    LIST_OPEN,
    find_idle_values,
    list_open_argv,
    make_dirs_argv,
    move_argv,
    stat_argv,
)
from apps.jobs.choices import EventLevel, JobStatus, StepStatus
from apps.jobs.events import emit
from apps.jobs.kinds import CellRecord, JobKind, StepSpec, register_kind
from apps.nodeexec.base import CommandResult, NodeTarget
from apps.nodeexec.catalogue import PLACEHOLDERS
from apps.parsers.errors import ParseError
from apps.parsers.files import parse_find_printf, parse_lsof_fields

MODES = ("survey", "apply", "revert")
CHECK, MOVE = "check", "move"


class StorageTieringJobParameters(serializers.Serializer):
    policy = serializers.UUIDField(help_text="The storage-tiering policy.")
    mode = serializers.ChoiceField(
        choices=MODES, help_text="survey: list idle and open files; apply: move the plan; revert: move them back."
    )
    action = serializers.UUIDField(required=False, help_text="apply and revert: the policy action.")
    directory = serializers.RegexField(
        rf"^(?:{PLACEHOLDERS['directory'].pattern})\Z", max_length=500, required=False, help_text="survey: where."
    )
    age_days = serializers.IntegerField(min_value=1, max_value=3650, required=False, help_text="survey: unread for.")
    min_bytes = serializers.IntegerField(min_value=0, required=False, help_text="survey: at least this large.")

    def validate(self, attrs):
        if not CostPolicy.objects.filter(public_id=attrs["policy"], kind=PolicyKind.STORAGE_TIERING).exists():
            raise serializers.ValidationError({"policy": ["No such storage-tiering policy."]})
        needs = ("directory", "age_days", "min_bytes") if attrs["mode"] == "survey" else ("action",)
        missing = [name for name in needs if name not in attrs]
        if missing:
            raise serializers.ValidationError({name: [f"A {attrs['mode']} needs it."] for name in missing})
        if "action" in attrs and not PolicyAction.objects.filter(public_id=attrs["action"]).exists():
            raise serializers.ValidationError({"action": ["No such policy action."]})
        return attrs


def _open_listing(result: CommandResult) -> set[str] | None:
    """The open files lsof listed; None when it could not look. lsof exits 1 when nothing is open, and on some
    hosts also when it listed files but could not read every process: its output is what counts."""
    text = result.stdout.decode("utf-8", errors="replace")
    if result.exit_code not in (0, 1) or result.error or (result.exit_code == 1 and not text and result.stderr):
        return None
    try:
        return parse_lsof_fields(text).paths
    except ParseError:
        return None


@register_kind
class StorageTieringJob(JobKind):
    name = JOB_KIND
    label = "Storage tiering"
    started_through = "its cost policy (POST /api/cost-policies/{id}/survey/ or dry-run/, then apply/ once approved)"
    description = (
        "Lists the files a storage-tiering policy would move (find -atime, lsof), or moves them one tier colder "
        "(mkdir -p, mv -n -T, read back) with a manifest, or moves the manifest back."
    )
    parameters = StorageTieringJobParameters
    transports = ("ssh", "local", "sim")
    rerun_on_worker_loss = True  # every move checks first where the file is: running again moves nothing twice

    def __init__(self):
        self.mode = "survey"
        self.moves: list[tuple[str, str, int]] = []  # (from, to, bytes) this run is to make
        self.watched: list[str] = []  # directories whose open files block a move
        self.open_now: set[str] | None = set()
        self.done: list[dict] = []
        self.left: list[str] = []  # files left on purpose (open now, gone): named, not a failure
        self.problems: list[str] = []  # moves that failed

    def steps(self, parameters: dict) -> list[StepSpec]:
        if parameters["mode"] == "survey":
            values = find_idle_values(
                parameters["directory"], days=parameters["age_days"], min_bytes=parameters["min_bytes"]
            )
            return [
                StepSpec(FIND_IDLE, FIND_IDLE, "Files unread", values=values),
                StepSpec(LIST_OPEN, LIST_OPEN, "Open files", values={"directory": parameters["directory"]}),
            ]
        return [
            StepSpec(CHECK, "", "Open files now", timeout=900),
            StepSpec(MOVE, "", "Move and read back", timeout=24 * 3600),
        ]

    def prepare(self, job, shard) -> None:
        self.mode = job.parameters["mode"]
        if self.mode == "survey":
            return
        action = PolicyAction.objects.get(public_id=job.parameters["action"])
        if self.mode == "apply":
            self.moves = [(row["source"], row["destination"], row["size_bytes"]) for row in action.plan]
        else:
            self.moves = [(entry["destination"], entry["source"], entry["size_bytes"]) for entry in action.manifest]
        self.watched = sorted({source.rsplit("/", 1)[0] for source, _, _ in self.moves})

    def step_runner(self, step: StepSpec):
        if self.mode == "survey":
            return None

        async def check(target: NodeTarget, run) -> CommandResult:
            results, held = [], set()
            for directory in _roots(self.watched):
                result = await run(list_open_argv(directory), 900.0)
                results.append(result)
                listed = _open_listing(result)
                if listed is None:
                    self.open_now = None
                    return CommandResult(exit_code=1, stdout=result.stdout, stderr=result.stderr, error=result.error)
                held |= listed
            self.open_now = held
            text = "".join(f"open: {path}\n" for path in sorted(held)) or "nothing open\n"
            return CommandResult(exit_code=0, stdout=text.encode())

        async def move(target: NodeTarget, run) -> CommandResult:
            results, made = [], set()
            for source, destination, size in self.moves:
                if source in (self.open_now or set()):
                    self.left.append(f"{source}: open now, left")
                    continue
                if _size(await run(stat_argv(source), 60.0)) is None:
                    if _size(await run(stat_argv(destination), 60.0)) == size:  # moved by an earlier try of this run
                        self.done.append({"source": source, "destination": destination, "size_bytes": size})
                    else:
                        self.left.append(f"{source}: not there any more, left")
                    continue
                parent = destination.rsplit("/", 1)[0]
                if parent not in made:
                    results.append(await run(make_dirs_argv(parent), 60.0))
                    made.add(parent)
                moved = await run(move_argv(source, destination), 3600.0)
                back = await run(stat_argv(destination), 60.0)
                found = _size(back)
                if moved.ok and found == size:
                    self.done.append({"source": source, "destination": destination, "size_bytes": size})
                else:
                    results.append(moved if not moved.ok else back)
                    self.problems.append(f"{source}: not moved ({_why(moved, found, size)})")
            lines = [f"{entry['source']} -> {entry['destination']}\n" for entry in self.done]
            joined = joined_results(results, "".join(lines).encode())
            if self.problems and joined.ok:
                return CommandResult(exit_code=1, stdout=joined.stdout, stderr=("\n".join(self.problems)).encode())
            return joined

        return check if step.name == CHECK else move

    def cell_record(self, target: NodeTarget, step: StepSpec, result: CommandResult) -> CellRecord:
        if step.name == LIST_OPEN and _open_listing(result) is not None:  # exit 1: nothing open
            count = len(_open_listing(result) or ())
            return CellRecord(StepStatus.SUCCEEDED, counted(count, "open file"), {"open": count})
        if step.name == FIND_IDLE and result.ok:
            try:
                listing = parse_find_printf(result.stdout.decode("utf-8", errors="replace"))
            except ParseError as error:
                return CellRecord(StepStatus.FAILED, f"could not read find's output: {error}"[:300])
            files, size = len(listing.files), listing.total_bytes
            return CellRecord(StepStatus.SUCCEEDED, f"{counted(files, 'file')}, {size / 1e9:.1f} GB", {"files": files})
        if step.name == MOVE:
            moved = len(self.done)
            summary = f"{moved} of {len(self.moves)} moved, read back"
            if self.problems:
                summary += f"; {len(self.problems)} failed: {self.problems[0]}"
            if self.left:
                summary += f"; {len(self.left)} left: {self.left[0]}"
            status = StepStatus.SUCCEEDED if result.ok else StepStatus.FAILED
            return CellRecord(
                status, summary[:300], {"moved": moved, "failed": len(self.problems), "left": len(self.left)}
            )
        return super().cell_record(target, step, result)

    def shard_finished(self, job, shard) -> None:
        if self.mode == "survey":
            return
        with transaction.atomic():
            action = PolicyAction.objects.select_for_update().get(public_id=job.parameters["action"])
            if self.mode == "apply":
                known = {entry["source"] for entry in action.manifest}
                action.manifest = [*action.manifest, *(entry for entry in self.done if entry["source"] not in known)]
            else:
                back = {entry["destination"] for entry in self.done}  # moved back: `destination` is where it was
                action.manifest = [entry for entry in action.manifest if entry["source"] not in back]
            action.save()
        for problem in self.left + self.problems:
            emit(job, problem, level=EventLevel.WARNING, step=MOVE)

    def job_finished(self, job) -> None:
        if job.parameters["mode"] != "survey":
            end_action(
                job,
                applied="{files} moved",
                reverted="every file back",
                revert_failed="revert {status}: {files} still moved",
                all_back=lambda action: not action.manifest,
            )
        elif job.status == JobStatus.SUCCEEDED:
            _propose_from(job)


def _roots(directories: list[str]) -> list[str]:
    """The fewest directories covering all of them (lsof +D descends)."""
    roots: list[str] = []
    for directory in sorted(directories):
        if not any(directory == root or directory.startswith(root + "/") for root in roots):
            roots.append(directory)
    return roots


def _size(result: CommandResult) -> int | None:
    if not result.ok:
        return None
    try:
        files = parse_find_printf(result.stdout.decode("utf-8", errors="replace")).files
    except ParseError:
        return None
    return files[0].size_bytes if len(files) == 1 else None


def _why(moved: CommandResult, found: int | None, size: int) -> str:
    if not moved.ok:
        text = moved.stderr.decode("utf-8", errors="replace").strip() or moved.error or f"exit {moved.exit_code}"
        return text.splitlines()[0][:120]
    return "not found after the move" if found is None else f"{found} bytes after the move, not {size}"


def _propose_from(job) -> None:
    """A finished survey: record the policy's proposal from it, as a dry run by whoever asked for the survey."""
    policy = CostPolicy.objects.filter(public_id=job.parameters["policy"]).first()
    if policy is None:
        return
    action, why_not = record_proposal(policy)
    if action is None:
        emit(job, why_not, level=EventLevel.WARNING)
        return
    emit(job, f"proposed: {action.reason}", data={"action": str(action.public_id)})
