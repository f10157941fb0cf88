"""Runbook 3, training interrupted, as pure functions: what the log says stopped the job, how much space the
checkpoint tier has, which of the newest checkpoints are whole and load, which nodes lost a GPU, and the recovery:
the newest valid checkpoint, the nodes to run on (a bad node replaced by a spare of the same SKU, else left out),
what to remove to free space (the oldest checkpoints beyond the job's keep count), and the resume for its launcher.

No database here: the kind (apps/diagnosis/kinds/training_interrupted.py) hands in plain facts and the commands' output.
"""

import base64
import re
from dataclasses import dataclass, field

from apps.core.text import counted
from apps.diagnosis.choices import ADVICE, Cause, EvidenceVerdict
from apps.diagnosis.runbook import FixCommand, Observation, Read, gpu_lost_without_xid
from apps.parsers.common import split_lines
from apps.parsers.dmesg import parse_dmesg
from apps.parsers.errors import ParseError
from apps.parsers.provisioning import parse_df
from apps.parsers.training_log import parse_training_log
from apps.parsers.triage import triage

CHECKED_CHECKPOINTS = 4  # the newest this many are checked, newest first, until one is valid
STEP_DIR = re.compile(r"^step_(?P<step>\d{7,9})$")
# Xids after which a GPU leaves service until it is reset or replaced (NVIDIA's Xid catalogue): DBE, row-remap
# failure, NVLink fatal, fallen off the bus, contained/uncontained ECC, GSP errors.
BAD_XIDS = {48, 64, 74, 79, 94, 95, 119, 120}
MANIFEST = "SHA256SUMS"
MARKER = ".metadata"
RDZV_PORT = 29500
# The triage problems in the job's log that runbook 3 weighs, and their topic (WEIGHTS). A GPU whose firmware (GSP)
# stopped answering or that needs a reset is a bad node as an Xid is; a port down is the fabric's (runbook 1's link
# check, see route()); a step Slurm could not kill, an OOM and aws-ofi-nccl's memlock failure (RC 12) end the
# workers without an infrastructure fault that a resume on other nodes would avoid: the evidence carries the advice.
LOG_PROBLEMS = {
    "nccl_watchdog_timeout": "watchdog",
    "ib_port_down": "fabric",
    "disk_full": "disk",
    "checkpoint_save_failed": "disk",
    "checkpoint_corrupt": "checkpoint",
    "checkpoint_missing": "checkpoint",
    "cuda_error": "cuda",
    "gpu_fell_off_bus": "cuda",
    "gpu_firmware_failure": "cuda",
    "gpu_reset_required": "cuda",
    "xid": "cuda",
    "ecc_uncorrectable": "cuda",
    "worker_failed": "worker",
    "oom": "worker",
    "nccl_system_error": "worker",
    "slurm_unkillable_step": "worker",
}


@dataclass(frozen=True)
class JobFacts:
    """The training job as the recovery needs it."""

    name: str
    launcher: str
    hosts: tuple[str, ...]  # node-rank order
    ranks_per_node: int
    checkpoint_dir: str
    entrypoint: str
    keep: int
    state: str = ""


def checkpoint_path(directory: str, step: int) -> str:
    return f"{directory.rstrip('/')}/step_{step:07d}"


# --- which runbook ------------------------------------------------------------------------------------------------


def route(topics: set[str]) -> str:
    """Which runbook the triage of the log calls for: runbook 1 when ranks timed out in a collective or a fabric
    port is down, with nothing else wrong (the fabric is suspect); runbook 3 for every other interruption (a full
    disk, a bad checkpoint, a lost GPU, a crashed worker)."""
    if topics & {"watchdog", "fabric"} and not topics & {"disk", "checkpoint", "cuda"}:
        return "nccl-timeout"
    return "training-interrupted"


# --- the log ------------------------------------------------------------------------------------------------------


def judge_log(hostname: str, text: str, command: str) -> list[Observation]:
    """What stopped the last attempt, each citing its lines; progress when nothing did."""
    run = parse_training_log(text)
    start = (run.last_start_line or 1) - 1
    recent = "\n".join(split_lines(text)[start:])
    found = []
    findings = triage(recent).findings
    timeouts = [finding for finding in findings if finding.problem == "nccl_watchdog_timeout"]
    for finding in findings:
        topic = LOG_PROBLEMS.get(finding.problem)
        if topic is None or (topic == "watchdog" and finding is not timeouts[0]):
            continue  # one watchdog finding stands for every rank's
        found.append(
            Observation(
                check=topic,
                subject=f"rank {finding.rank}" if finding.rank is not None else (finding.gpu or ""),
                verdict=EvidenceVerdict.FAULT,
                summary=f"{finding.problem}: {finding.detail}"[:300],
                command=command,
                excerpt="\n".join(finding.excerpt[:4]),
                hostname=finding.node or hostname,
                data={
                    "problem": finding.problem,
                    "rank": finding.rank,
                    "lines": [line + start for line in finding.lines],
                    "xid": finding.xid,
                    "advice": ADVICE[finding.problem].next_step,
                },
            )
        )
    if run.steps_since_start or run.resumed_from is not None:
        found.append(
            Observation(
                check="progress",
                subject="",
                verdict=EvidenceVerdict.HEALTHY if run.steps_since_start and not found else EvidenceVerdict.INFO,
                summary=(
                    f"{counted(run.steps_since_start, 'iteration line')} since the last start, newest step "
                    f"{run.last_step}"
                    + (f", resumed from step {run.resumed_from}" if run.resumed_from is not None else "")
                ),
                command=command,
                hostname=hostname,
                data={
                    "steps": run.steps_since_start,
                    "last_step": run.last_step,
                    "resumed_from": run.resumed_from,
                    "attempts": run.attempts,
                },
            )
        )
    return found


# --- the checkpoint tier ------------------------------------------------------------------------------------------


def storage_reads(directory: str) -> list[Read]:
    return [Read("df", "df-path", (("path", directory),)), Read("ls", "ls-dir", (("checkpoint_path", directory),))]


def checkpoint_reads(directory: str, step: int) -> list[Read]:
    path = checkpoint_path(directory, step)
    return [
        Read(f"files:{step}", "ls-all", (("checkpoint_path", path),)),
        Read(f"manifest:{step}", "sha256-check", (("checkpoint_path", f"{path}/{MANIFEST}"),)),
        Read(f"load:{step}", "checkpoint-load", (("checkpoint_path", path),)),
    ]


def judge_space(hostname: str, ok: bool, text: str, command: str) -> Observation:
    if not ok:
        return Observation("space", "", EvidenceVerdict.COULD_NOT_RUN, f"could not run: {text[-200:]}", command)
    try:
        system = parse_df(text).file_systems[-1]
    except (ParseError, IndexError):
        return Observation("space", "", EvidenceVerdict.COULD_NOT_RUN, "df printed no file system", command, text)
    full = system.available_bytes == 0  # (df rounds Use% up: 100% may still leave room on a large volume)
    return Observation(
        "space",
        system.mount_point,
        EvidenceVerdict.FAULT if full else EvidenceVerdict.HEALTHY,
        f"{system.mount_point} ({system.source}): {_gb(system.available_bytes)} free of {_gb(system.size_bytes)} "
        f"({system.use_pct}% used)",
        command,
        text.strip(),
        hostname,
        {"available": system.available_bytes, "size": system.size_bytes, "mount": system.mount_point},
    )


def _gb(value: int) -> str:
    return f"{value / 1e9:.1f} GB"


def checkpoint_steps(text: str) -> list[int]:
    """The steps of the checkpoint directories `ls` names, oldest first."""
    return sorted(int(match["step"]) for name in text.split() if (match := STEP_DIR.match(name)))


@dataclass
class CheckpointVerdict:
    step: int
    path: str
    valid: bool
    observations: list[Observation] = field(default_factory=list)
    incomplete: bool = False  # no marker: a save that never finished (safe to remove)


_LS_LINE = re.compile(r"^[-d][rwxsStT-]{9}\S*\s+\d+\s+\S+\s+\S+\s+(?P<size>\d+)\s+.*?\s(?P<name>\S+)$")


def judge_checkpoint(
    hostname: str, step: int, path: str, world_size: int, outputs: dict[str, tuple[bool, str, str]]
) -> CheckpointVerdict:
    """Every shard present and non-empty, the .metadata marker, the manifest's hashes, and that it loads."""
    verdict = CheckpointVerdict(step, path, valid=True)
    subject = f"step {step}"

    def add(check, good, summary, command, excerpt="", data=None):
        verdict.observations.append(
            Observation(
                check,
                subject,
                EvidenceVerdict.HEALTHY if good else EvidenceVerdict.FAULT,
                summary,
                command,
                excerpt,
                hostname,
                {"step": step, "path": path, **(data or {})},
            )
        )
        verdict.valid = verdict.valid and good

    ok, text, command = outputs[f"files:{step}"]
    sizes = {}
    for line in split_lines(text) if ok else []:
        if match := _LS_LINE.match(line.strip()):
            sizes[match["name"]] = int(match["size"])
    shards = {name: size for name, size in sizes.items() if name.endswith(".distcp")}
    missing = [rank for rank in range(world_size) if f"__{rank}_0.distcp" not in shards]
    empty = sorted(name for name, size in shards.items() if size == 0)
    add(
        "shards",
        ok and not missing and not empty,
        (f"could not list: {text.strip()[-200:]}" if not ok else "")
        or (
            f"{len(shards)} of {world_size} shards"
            + (f"; missing ranks {_ranks(missing)}" if missing else "")
            + (f"; empty: {', '.join(empty[:4])}" if empty else "; none empty")
        ),
        command,
        "\n".join(line for line in split_lines(text) if ".distcp" in line and " 0 " in line)[:1000],
        {"shards": len(shards), "missing": missing[:64], "empty": empty[:64], "bytes": sum(sizes.values())},
    )
    marker = MARKER in sizes
    verdict.incomplete = ok and not marker
    add(
        "marker",
        marker,
        f"{MARKER} present (the save finished)" if marker else f"no {MARKER}: the save never finished",
        command,
    )
    ok, text, command = outputs[f"manifest:{step}"]
    failed = [line for line in split_lines(text) if line.endswith("FAILED") or "FAILED open or read" in line]
    add(
        "manifest",
        ok and not failed,
        (
            f"{counted(sum(1 for line in split_lines(text) if line.endswith(': OK')), 'file')} matching the manifest"
            if ok
            else ""
        )
        or (
            f"{counted(len(failed), 'file')} not matching the manifest"
            if failed
            else f"no manifest: {text.strip()[-160:]}"
        ),
        command,
        "\n".join(failed[:4]) or text.strip()[-300:],
    )
    ok, text, command = outputs[f"load:{step}"]
    last = next((line for line in reversed(text.strip().splitlines()) if line.strip()), "")
    add("load", ok, last[:300] if ok else f"does not load: {last.strip()}"[:300], command, last)
    return verdict


def _ranks(numbers: list[int]) -> str:
    return ", ".join(str(n) for n in numbers[:8]) + (" …" if len(numbers) > 8 else "")


# --- the nodes ----------------------------------------------------------------------------------------------------


def judge_kernel(hostname: str, ok: bool, text: str, command: str) -> Observation:
    if not ok:
        return Observation("xid", "", EvidenceVerdict.COULD_NOT_RUN, f"could not run: {text[-200:]}", command)
    try:
        xids = parse_dmesg(text).xids
    except ParseError:
        xids = []
    bad = [event for event in xids if event.xid in BAD_XIDS]
    silent = gpu_lost_without_xid(text)  # GSP timeouts, NV_ERR_RESET_REQUIRED: many drivers print no Xid
    lines = split_lines(text)
    what = [f"{finding.gpu or 'a GPU'}: {finding.detail}" for finding in silent]
    if bad:
        what.insert(
            0,
            "; ".join(sorted({f"Xid {event.xid} on {event.pci_bus_id}" for event in bad}))
            + ": the GPU must leave service (ECC / fallen off the bus / NVLink)",
        )
    return Observation(
        "xid",
        bad[0].pci_bus_id if bad else (silent[0].gpu or "" if silent else ""),
        EvidenceVerdict.FAULT if what else EvidenceVerdict.HEALTHY,
        "; ".join(what)[:300]
        or f"no GPU-fatal Xid, uncorrectable ECC, GSP timeout or reset-required "
        f"({counted(len(xids), 'other Xid line')})",
        command,
        "\n".join([lines[event.line - 1] for event in bad[:4]] + [line for f in silent for line in f.excerpt[:2]]),
        hostname,
        {
            "xids": sorted({event.xid for event in xids}),
            "bad": sorted({event.xid for event in bad}),
            "problems": sorted({finding.problem for finding in silent}),
        },
    )


# --- ranking ------------------------------------------------------------------------------------------------------

# A clean node does not speak against a bad one (the GPU fails on one node), so no check's health counts against
# the bad-node cause; every node's worker dying (the launcher tears them all down) only weakly says "crash".
WEIGHTS: dict[tuple[str, str], dict[str, int]] = {
    ("disk", EvidenceVerdict.FAULT): {Cause.CHECKPOINT_DISK_FULL: 6},
    ("space", EvidenceVerdict.FAULT): {Cause.CHECKPOINT_DISK_FULL: 10},
    ("space", EvidenceVerdict.HEALTHY): {Cause.CHECKPOINT_DISK_FULL: -3},
    ("checkpoint", EvidenceVerdict.FAULT): {Cause.CHECKPOINT_CORRUPT: 6},
    ("load", EvidenceVerdict.FAULT): {Cause.CHECKPOINT_CORRUPT: 4},
    ("manifest", EvidenceVerdict.FAULT): {Cause.CHECKPOINT_CORRUPT: 2},
    ("cuda", EvidenceVerdict.FAULT): {Cause.BAD_NODE: 4},
    ("xid", EvidenceVerdict.FAULT): {Cause.BAD_NODE: 10},
    ("worker", EvidenceVerdict.FAULT): {Cause.WORKER_CRASH: 1},
}


def weights(seen: Observation) -> dict[str, int]:
    return WEIGHTS.get((seen.check, seen.verdict), {})


# --- the recovery -------------------------------------------------------------------------------------------------


@dataclass
class RecoveryPlan:
    cause: str
    summary: str
    commands: list[FixCommand]
    artefact: str  # the resume as it runs (commands) or as a person applies it (Slurm, Kubernetes)
    resume_step: int | None
    hosts: tuple[str, ...]
    removed: list[str] = field(default_factory=list)
    excluded: list[str] = field(default_factory=list)
    replaced: dict[str, str] = field(default_factory=dict)  # bad host -> spare


def choose_checkpoint(verdicts: list[CheckpointVerdict]) -> CheckpointVerdict | None:
    """The newest valid checkpoint."""
    return max((verdict for verdict in verdicts if verdict.valid), key=lambda verdict: verdict.step, default=None)


def to_remove(steps: list[int], verdicts: list[CheckpointVerdict], resume: int, keep: int) -> list[int]:
    """What frees space without losing what matters: saves that never finished (no marker), and the oldest
    checkpoints beyond the keep count (the chosen one counts; corrupt ones are kept for a person to look at)."""
    incomplete = {verdict.step for verdict in verdicts if verdict.incomplete}
    invalid = {verdict.step for verdict in verdicts if not verdict.valid}
    older = [step for step in steps if step < resume and step not in invalid]
    beyond = older[: max(len(older) - (keep - 1), 0)]
    return sorted(incomplete | set(beyond))


def plan_recovery(
    *,
    job: JobFacts,
    cause: str,
    steps: list[int],
    verdicts: list[CheckpointVerdict],
    disk_full: bool,
    bad_hosts: list[str],
    spares: dict[str, str],
    rendezvous: str,
    controller: str = "",
) -> RecoveryPlan | None:
    """The recovery, or None when no checkpoint is valid (nothing to resume from: a person decides)."""
    chosen = choose_checkpoint(verdicts)
    if chosen is None:
        return None
    hosts, excluded, replaced = [], [], {}
    for host in job.hosts:
        if host not in bad_hosts:
            hosts.append(host)
        elif host in spares:
            hosts.append(spares[host])
            replaced[host] = spares[host]
        else:
            excluded.append(host)
    removed = to_remove(steps, verdicts, chosen.step, job.keep) if disk_full else []
    commands = [
        FixCommand(hosts[0], "remove-checkpoint", (("checkpoint_step_dir", checkpoint_path(job.checkpoint_dir, step)),))
        for step in removed
    ]
    artefact, resume = resume_artefact(job, tuple(hosts), chosen.step, rendezvous, controller)
    commands += resume
    parts = []
    if disk_full:
        parts.append(
            f"free space: remove {counted(len(removed), 'checkpoint')} "
            f"({', '.join(f'step {step}' for step in removed)})"
            if removed
            else "free space by hand (nothing Rackpilot may remove within the keep count)"
        )
    for bad, spare in replaced.items():
        parts.append(f"replace {bad} by the spare {spare}")
    for bad in excluded:
        parts.append(f"leave out {bad} (no healthy spare of its SKU): {counted(len(hosts), 'node')}")
    parts.append(f"resume from step {chosen.step} ({chosen.path}) on {', '.join(hosts)}")
    summary = "; ".join(parts)
    summary = summary[0].upper() + summary[1:]
    if disk_full and not removed:
        commands = []  # resuming onto a full volume fails at the next save
    return RecoveryPlan(cause, summary, commands, artefact, chosen.step, tuple(hosts), removed, excluded, replaced)


MANIFEST_DIR = "/var/lib/rackpilot/resume"  # where the Kubernetes resume's manifest is written on the controller


def resume_artefact(
    job: JobFacts, hosts: tuple[str, ...], step: int, rendezvous: str, controller: str = ""
) -> tuple[str, list[FixCommand]]:
    """The resume for the job's launcher: torchrun on every node; for Slurm a new batch job on the plan's nodes
    (the left-out ones excluded), for Kubernetes an Indexed Job pinned to them, both run on the scheduler's
    controller. Without a controller the Slurm and Kubernetes resumes are only shown, for a person to apply."""
    if job.launcher in ("torchrun", "mpirun"):
        commands = [
            FixCommand(
                host,
                "resume-torchrun",
                (
                    ("unit", f"rackpilot-resume-{job.name}"),
                    ("number", len(hosts)),
                    ("gpus", job.ranks_per_node),
                    ("node_rank", rank),
                    ("marker", rendezvous),
                    ("rdzv_endpoint", f"{hosts[0]}:{RDZV_PORT}"),
                    ("path", job.entrypoint),
                    ("checkpoint_dir", job.checkpoint_dir),
                    ("step", step),
                ),
            )
            for rank, host in enumerate(hosts)
        ]
    elif job.launcher == "slurm":
        excluded = [host for host in job.hosts if host not in hosts]
        values = (
            ("slurm_job", job.name),
            ("number", len(hosts)),
            ("node_list", ",".join(hosts)),
            ("gpus", job.ranks_per_node),
            *((("excluded_nodes", ",".join(excluded)),) if excluded else ()),
            ("path", job.entrypoint),
            ("checkpoint_dir", job.checkpoint_dir),
            ("step", step),
        )
        commands = [FixCommand(controller, "resume-sbatch-excluding" if excluded else "resume-sbatch", values)]
    else:
        manifest = job_manifest(job, hosts, step, rendezvous)
        path = f"{MANIFEST_DIR}/{_dns_name(rendezvous)}.yaml"
        encoded = base64.b64encode(manifest.encode()).decode()
        commands = [
            FixCommand(controller, "write-file", (("base64", encoded), ("path", path))),
            FixCommand(controller, "kubectl-apply", (("path", path),)),
        ]
        if not controller:
            return manifest, []
        return f"{manifest}\n# then, on {controller}:\n{commands[1].text()}\n", commands
    if not controller and job.launcher == "slurm":
        return commands[0].text(), []
    return "\n".join(f"{command.hostname}$ {command.text()}" for command in commands), commands


def _dns_name(text: str) -> str:
    """A Kubernetes object name (RFC 1123 label: lower case, digits and '-', at most 63)."""
    return re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")[:63].rstrip("-")


def job_manifest(job: JobFacts, hosts: tuple[str, ...], step: int, rendezvous: str) -> str:
    """An Indexed Job with one pod per node rank, pinned to the plan's nodes, each running torchrun from the step."""
    name = _dns_name(rendezvous)
    program = [job.entrypoint, "--load", job.checkpoint_dir, "--ckpt-step", str(step)]
    nodes = "\n".join(f"                - {host}" for host in hosts)
    return f"""apiVersion: batch/v1
kind: Job
metadata:
  name: {name}
  labels:
    rackpilot.io/training-job: {_dns_name(job.name)}
spec:
  completions: {len(hosts)}
  parallelism: {len(hosts)}
  completionMode: Indexed
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
      subdomain: {name}
      affinity:
        nodeAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
            nodeSelectorTerms:
            - matchExpressions:
              - key: kubernetes.io/hostname
                operator: In
                values:
{nodes}
      containers:
      - name: trainer
        image: trainer
        command: ["torchrun", "--nnodes", "{len(hosts)}", "--nproc-per-node", "{job.ranks_per_node}",
                  "--node-rank", "$(JOB_COMPLETION_INDEX)", "--rdzv-endpoint", "{name}-0.{name}:{RDZV_PORT}",
                  {", ".join(f'"{word}"' for word in program)}]
        resources:
          limits:
            nvidia.com/gpu: {job.ranks_per_node}
"""
