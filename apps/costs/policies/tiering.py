"""Policy 3, storage tiering: files under a directory of a hot (or warm) tier volume not read for `age_days` move one
tier colder (hot → warm, warm → cold), to the same relative path under the colder volume's mount on the same node.

Which files is a survey's finding, not a guess: a `storage-tiering` job in survey mode runs `find DIR -atime +N -size
+Nc -printf '%s %A@ %p\\n'` and `lsof -F pcfn +D DIR` on the node, and the dry run reads both (apps.parsers.files).
Files a process holds open are left, and so is a running training job's newest checkpoint (the one a restart would
load), whatever lsof says. The saving is the draw of the bytes moved: bytes × (W/TB of the source tier − W/TB of the
destination), the per-tier figures in settings (RACKPILOT_STORAGE_*_WATTS_PER_TB).
"""

from collections import Counter
from datetime import timedelta

from django.conf import settings
from django.utils import timezone
from rest_framework import serializers

from apps.core.text import counted
from apps.costs.commands import command_line
from apps.costs.policies.base import PolicyKindSpec, Proposal, register_policy_kind
from apps.costs.tiering_commands import (
    FIND_IDLE,
    LIST_OPEN,
    make_dirs_argv,
    move_argv,
)
from apps.inventory.choices import StorageTierKind
from apps.inventory.models import Node, Volume
from apps.jobs.choices import JobStatus
from apps.jobs.models import Job
from apps.nodeexec.catalogue import PLACEHOLDERS
from apps.parsers.errors import ParseError
from apps.parsers.files import parse_find_printf, parse_lsof_fields
from apps.workloads.choices import TrainingState
from apps.workloads.models import TrainingJob

JOB_KIND = "storage-tiering"
COLDER = {StorageTierKind.HOT: StorageTierKind.WARM, StorageTierKind.WARM: StorageTierKind.COLD}
SURVEY_MAX_AGE = timedelta(hours=6)  # older than this, the listing no longer says what is idle now
TOP_DIRECTORIES = 5
BYTES_PER_TB = 10**12


class StorageTieringParameters(serializers.Serializer):
    node = serializers.RegexField(
        rf"^(?:{PLACEHOLDERS['scheduler_node'].pattern})\Z",
        label="Node",
        max_length=253,
        help_text="The node that mounts both tiers and runs find, lsof and mv (a storage or management node).",
    )
    source_path = serializers.RegexField(
        rf"^(?:{PLACEHOLDERS['directory'].pattern})\Z",
        label="Source directory",
        max_length=500,
        help_text="A directory on the node's hot or warm tier volume: files under it move one tier colder.",
        error_messages={"invalid": "An absolute directory path of letters, digits, _ . - (no spaces)."},
    )
    age_days = serializers.IntegerField(
        label="Not read for",
        min_value=1,
        max_value=3650,
        default=7,
        help_text="Move files not read for this many days (find -atime).",
    )
    min_size_mb = serializers.IntegerField(
        label="Smallest file",
        min_value=0,
        max_value=10_000_000,
        default=0,
        help_text="Leave files smaller than this (MB, 10^6 bytes).",
    )
    max_files = serializers.IntegerField(
        label="Files per action",
        min_value=1,
        max_value=5000,
        default=1000,
        help_text="At most this many files in one action (oldest first).",
    )


def volume_holding(node: Node, path: str) -> Volume | None:
    """The node's volume whose mount point holds `path` (the deepest one)."""
    holders = [
        volume
        for volume in node.volumes.select_related("tier")
        if path == volume.mount_point or path.startswith(volume.mount_point.rstrip("/") + "/")
    ]
    return max(holders, key=lambda volume: len(volume.mount_point), default=None)


def tiers_of(parameters: dict) -> tuple[Node, Volume, Volume]:
    """(node, source volume, destination volume) of valid parameters; ValidationError naming the field otherwise."""
    node = Node.objects.filter(hostname=parameters["node"]).first()
    if node is None:
        raise serializers.ValidationError({"node": [f"No node {parameters['node']} in the inventory."]})
    path = parameters["source_path"]
    source = volume_holding(node, path)
    if source is None or source.tier.kind not in COLDER:
        mounts = ", ".join(
            f"{volume.mount_point} ({volume.tier.kind})" for volume in node.volumes.select_related("tier")
        )
        raise serializers.ValidationError(
            {"source_path": [f"{path} is not on a hot or warm tier volume of {node.hostname} ({mounts or 'none'})."]}
        )
    colder = COLDER[source.tier.kind]
    destination = node.volumes.select_related("tier").filter(tier__kind=colder).order_by("mount_point").first()
    if destination is None:
        raise serializers.ValidationError(
            {"source_path": [f"{node.hostname} mounts no {colder} tier volume to move {path} to."]}
        )
    return node, source, destination


def destination_of(path: str, source: Volume, destination: Volume) -> str:
    """The same relative path under the colder volume's mount point."""
    relative = path[len(source.mount_point.rstrip("/")) :]
    return destination.mount_point.rstrip("/") + relative


def survey_of(policy) -> Job | None:
    """The policy's newest finished survey."""
    return (
        Job.objects.filter(kind=JOB_KIND, parameters__policy=str(policy.public_id), parameters__mode="survey")
        .exclude(finished=None)
        .order_by("-finished", "-pk")
        .first()
    )


def _stdout(job: Job, step: str) -> tuple[str, int | None] | None:
    cell = job.steps.filter(step=step).prefetch_related("artifacts").first()
    if cell is None:
        return None
    text = next((artifact.text() for artifact in cell.artifacts.all() if artifact.stream == "stdout"), "")
    return text, cell.exit_code


def _fresh(survey: Job, policy) -> bool:
    return survey.finished >= policy.updated and timezone.now() - survey.finished <= SURVEY_MAX_AGE


def in_use_checkpoints(node: Node, source_path: str, candidates: list[str]) -> set[str]:
    """The newest checkpoint directory of each running (or interrupted) training job on the node whose checkpoints
    are under the source: what a restart or a recovery would load. Read from the workloads, so it holds even where
    lsof sees nothing open."""
    kept = set()
    live = (TrainingState.RUNNING, TrainingState.INTERRUPTED)
    jobs = TrainingJob.objects.filter(state__in=live, members__node=node).distinct()
    for job in jobs:
        directory = (job.checkpoint_dir or "").rstrip("/")
        if not directory or not (directory + "/").startswith(source_path.rstrip("/") + "/"):
            continue
        steps = {path[len(directory) + 1 :].split("/", 1)[0] for path in candidates if path.startswith(directory + "/")}
        if steps:
            kept.add(f"{directory}/{max(steps)}")
    return kept


def summary(plan: list[dict]) -> dict:
    """Count, bytes and the directories holding most bytes, of a tiering plan."""
    by_directory: Counter = Counter()
    counts: Counter = Counter()
    for row in plan:
        directory = row["source"].rsplit("/", 1)[0]
        by_directory[directory] += row["size_bytes"]
        counts[directory] += 1
    return {
        "files": len(plan),
        "bytes": sum(row["size_bytes"] for row in plan),
        "top_directories": [
            {"directory": directory, "files": counts[directory], "bytes": size}
            for directory, size in by_directory.most_common(TOP_DIRECTORIES)
        ],
    }


def _gigabytes(size: int) -> str:
    return f"{size / 10**9:.1f} GB"


@register_policy_kind
class StorageTiering(PolicyKindSpec):
    name = "storage_tiering"
    label = "Storage tiering"
    parameters = StorageTieringParameters
    units = {"age_days": "days", "min_size_mb": "MB", "max_files": "files"}
    scopes = ("cluster",)  # it names its node in its parameters
    job_kind = JOB_KIND
    enforces = False  # a move stays moved: nothing to re-apply after a reboot
    guards_latency = False  # moving idle files off a tier does not slow what runs: a burning SLO is no reason to undo

    def check_scope(self, parameters, *, nodes):
        tiers_of(parameters)
        return parameters

    def propose(self, policy, *, source, now, exclude):
        parameters = policy.parameters
        node, from_volume, to_volume = tiers_of(parameters)
        if node.hostname in exclude:
            return None, f"{node.hostname}: a move of this policy is still in force (revert it or let it finish)"
        survey = survey_of(policy)
        if survey is None or survey.status != JobStatus.SUCCEEDED:
            why = "no survey yet" if survey is None else f"the last survey {survey.status}"
            return None, f"{why}: survey {parameters['source_path']} on {node.hostname} first"
        if not _fresh(survey, policy):
            return None, "the last survey is older than the policy or than 6 hours: survey again"
        listing, open_files = _stdout(survey, FIND_IDLE), _stdout(survey, LIST_OPEN)
        if listing is None or open_files is None:
            return None, "the survey's output is gone (pruned): survey again"
        try:
            found = parse_find_printf(listing[0]).files
            held = parse_lsof_fields(open_files[0]).paths
        except ParseError as error:
            return None, f"could not read the survey: {error}"
        root = parameters["source_path"].rstrip("/")
        found = [file for file in found if file.path.startswith(root + "/")]
        kept_dirs = in_use_checkpoints(node, root, [file.path for file in found])
        notes, plan = [], []
        open_here = {file.path for file in found if file.path in held}
        if open_here:
            notes.append(f"{counted(len(open_here), 'file')} left: a running process holds them open (lsof)")
        in_use = {
            file.path
            for file in found
            if file.path not in open_here and any(file.path.startswith(kept + "/") for kept in kept_dirs)
        }
        if in_use:
            notes.append(
                f"{counted(len(in_use), 'file')} left: the newest checkpoint of a running job ({', '.join(kept_dirs)})"
            )
        left = open_here | in_use
        movable = sorted((file for file in found if file.path not in left), key=lambda file: file.atime)
        limit = parameters["max_files"]
        if len(movable) > limit:
            notes.append(f"{counted(len(movable) - limit, 'more file')} left for the next action (max_files {limit})")
        for file in movable[:limit]:
            plan.append(
                {
                    "hostname": node.hostname,
                    "source": file.path,
                    "destination": destination_of(file.path, from_volume, to_volume),
                    "size_bytes": file.size_bytes,
                    "atime": round(file.atime, 3),
                }
            )
        if not plan:
            return None, "; ".join(notes) or f"no file under {root} unread for {parameters['age_days']} days"
        moved = sum(row["size_bytes"] for row in plan)
        watts = settings.RACKPILOT_STORAGE_WATTS_PER_TB
        from_kind, to_kind = from_volume.tier.kind, to_volume.tier.kind
        saving_w = moved / BYTES_PER_TB * (watts[from_kind] - watts[to_kind])
        directories = sorted({row["destination"].rsplit("/", 1)[0] for row in plan})
        commands = [command_line(make_dirs_argv(directory)) for directory in directories]
        commands += [command_line(move_argv(row["source"], row["destination"])) for row in plan]
        back = sorted({row["source"].rsplit("/", 1)[0] for row in plan})
        reverts = [command_line(make_dirs_argv(directory)) for directory in back]
        reverts += [command_line(move_argv(row["destination"], row["source"])) for row in plan]
        reason = (
            f"{counted(len(plan), 'file')}, {_gigabytes(moved)} under {node.hostname}:{root} unread for "
            f"{parameters['age_days']} days: {from_kind} → {to_kind} ({to_volume.mount_point})"
        )
        return (
            Proposal(
                reason=reason,
                plan=plan,
                commands={node.hostname: commands},
                revert_commands={node.hostname: reverts},
                window_seconds=parameters["age_days"] * 86400,
                expected_kwh_per_day=saving_w * 24 / 1000,
                notes=notes,
            ),
            "",
        )

    def survey(self, policy):
        parameters = policy.parameters
        values = {
            "policy": str(policy.public_id),
            "mode": "survey",
            "directory": parameters["source_path"],
            "age_days": parameters["age_days"],
            "min_bytes": parameters["min_size_mb"] * 10**6,
        }
        return parameters["node"], values

    def survey_due(self, policy):
        surveys = Job.objects.filter(kind=JOB_KIND, parameters__policy=str(policy.public_id), parameters__mode="survey")
        if surveys.filter(finished=None).exists():
            return False
        newest = survey_of(policy)
        return newest is None or not _fresh(newest, policy)

    def job_parameters(self, action, *, mode):
        return {"policy": str(action.policy.public_id), "action": str(action.public_id), "mode": mode}
