"""kubectl and scontrol as a controller answers a node drain: the lines kubectl prints, scontrol's silence on
success; a node the cluster does not know is the real tools' error (when the caller offers the cluster's nodes).
Slurm's node states, drains, resumes and reboots (and `sinfo`) are the controller's: apps/simulator/tools/slurmctld.py;
Kubernetes' cordons, taints and node conditions (`kubectl get nodes -o json`, `kubectl taint`) the API server's:
apps/simulator/tools/kube_apiserver.py.
And the scheduler's placement of the cluster's training jobs, as the controller (any host with the client) lists
it: `kubectl get pods --all-namespaces -o wide` for the Kubernetes jobs, `scontrol show job -d` for the Slurm ones,
each with the second trainer the co_located fault placed beside the job on a node. And `kubectl apply -f FILE` of a
training job's resume Job."""

import zlib
from datetime import UTC, datetime

import yaml

from apps.simulator import clock
from apps.simulator.model import noise
from apps.simulator.terminal import CommandOutput, Context, fail, ok
from apps.simulator.tools import kube_apiserver, slurmctld
from apps.simulator.tools.system import read_file
from apps.simulator.tools.utilisation import NAMESPACE, job_states
from apps.simulator.training import TrainingRun, cluster_runs
from apps.simulator.training_faults import RESUME

# What the GPU Operator runs on every GPU node: `kubectl drain --ignore-daemonsets` leaves these and says so.
DAEMONSETS = (
    "kube-system/kube-proxy",
    "gpu-operator/nvidia-device-plugin-daemonset",
    "gpu-operator/nvidia-dcgm-exporter",
)


def _known(context: Context, node: str) -> bool:
    return context.peers is None or node == context.hostname or context.peers(node) is not None


def kubectl(context: Context, argv: list[str]) -> CommandOutput:
    if argv[1:] == ["get", "pods", "--all-namespaces", "-o", "wide"]:
        return node_pods(context)
    if argv[1:3] == ["apply", "-f"] and len(argv) == 4:
        return apply_manifest(context, argv[3])
    if argv[1:2] == ["get"] and argv[2:3] and argv[2] in {"nodes", "node", "no"}:
        return kube_apiserver.get_nodes(context, argv[3:])
    if argv[1:2] == ["taint"]:
        return kube_apiserver.taint(context, argv[2:])
    verb, node = (argv[1], argv[2]) if len(argv) > 2 else ("", "")
    if verb not in {"cordon", "uncordon", "drain"}:
        return fail(1, f'error: unknown command "{verb}" for "kubectl"\n')
    if not _known(context, node):
        return fail(1, f'Error from server (NotFound): nodes "{node}" not found\n')
    if context.cluster is None:  # no API server's node list offered: answer as one would, keeping nothing
        cordoned = CommandOutput(0, f"node/{node} already cordoned\n" if verb == "drain" else f"node/{node} {verb}ed\n")
    else:
        cordoned = kube_apiserver.cordon(context, "uncordon" if verb == "uncordon" else "cordon", node)
    if verb == "drain" and cordoned.exit_code == 0:  # drain cordons first, then evicts
        pods = ", ".join(f"{name}-{context.seed % 100000:05d}" for name in DAEMONSETS)
        return CommandOutput(
            0, f"{cordoned.stdout}node/{node} drained\n", f"Warning: ignoring DaemonSet-managed Pods: {pods}\n"
        )
    return cordoned


def scontrol(context: Context, argv: list[str]) -> CommandOutput:
    if argv[1:] == ["show", "job", "-d"]:
        return slurm_jobs(context)
    if argv[1:3] == ["show", "node"]:
        return slurmctld.show_node(context, argv[3:])
    if argv[1:2] == ["reboot"]:
        return slurmctld.reboot(context, argv[2:])
    fields = dict(element.partition("=")[::2] for element in argv[2:] if "=" in element)
    if argv[1:2] != ["update"] or "NodeName" not in fields or fields.get("State") not in {"DRAIN", "DOWN", "RESUME"}:
        return fail(1, "scontrol: error: Invalid input\n")
    return slurmctld.update_node(context, fields)


# --- kubectl get pods --all-namespaces -o wide --------------------------------------------------------------------

POD_COLUMNS = ("NAMESPACE", "NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE", "NOMINATED NODE")
POD_COLUMNS += ("READINESS GATES",)


def _age(seconds: float) -> str:
    """kubectl's short duration: 45s, 12m, 5h, 3d."""
    seconds = max(int(seconds), 0)
    for size, unit in ((86400, "d"), (3600, "h"), (60, "m")):
        if seconds >= 2 * size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def node_pods(context: Context, now: float | None = None) -> CommandOutput:
    """Every pod on the nodes of the cluster's Kubernetes training jobs: their trainer pods (one per node rank), the
    GPU Operator's DaemonSets, and a second trainer where one was placed beside the job's."""
    now = clock.now() if now is None else now
    rows = []
    for run in cluster_runs():
        if run.launcher != "kubernetes":
            continue
        for rank, state in enumerate(job_states(context, run)):
            node = state.hostname
            address = f"10.244.{rank % 250}"
            for number, daemonset in enumerate(DAEMONSETS):
                namespace, name = daemonset.split("/")
                suffix = f"{noise(context.seed, node, daemonset).randrange(16**5):05x}"
                rows.append((namespace, f"{name}-{suffix}", "1/1", "Running", "0", "12d", f"{address}.{2 + number}"))
                rows[-1] += (node,)
            rows.append((NAMESPACE, f"{run.name}-worker-{rank}", "1/1", "Running", "0", _age(now - run.started)))
            rows[-1] += (f"{address}.20", node)
            if state.co_located_pod:
                rows.append((NAMESPACE, state.co_located_pod, "1/1", "Running", "0", "40m", f"{address}.21", node))
    table = [POD_COLUMNS] + [(*row, "<none>", "<none>") for row in dict.fromkeys(rows)]
    widths = [max(len(row[column]) for row in table) for column in range(len(POD_COLUMNS))]
    lines = ["   ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in table]
    if len(table) == 1:
        return CommandOutput(0, "", "No resources found\n")
    return ok("\n".join(lines) + "\n")


# --- scontrol show job -d -------------------------------------------------------------------------------------------

CO_LOCATED_JOB = ("finetune-7b", "ft", 1002)  # the other team's trainer: name, user, uid
TRAINER = ("train", 1001)


def slurm_job_id(run: TrainingRun) -> int:
    """A stable job id per run (the co-located trainer's is the next one)."""
    return 40000 + zlib.crc32(run.name.encode()) % 50000


def hostlist(hosts: list[str]) -> str:
    """Slurm's compressed host list: gpu001,gpu002,gpu004,mgmt01 -> gpu[001-002,004],mgmt01."""
    groups: dict[tuple[str, int], set[int]] = {}
    for host in hosts:
        stem = host.rstrip("0123456789")
        digits = host[len(stem) :]
        groups.setdefault((stem, len(digits)), set()).add(int(digits) if digits else 0)
    parts = []
    for (stem, width), numbers in groups.items():
        if not width:
            parts.append(stem)
        elif len(numbers) == 1:
            parts.append(f"{stem}{min(numbers):0{width}d}")
        else:
            parts.append(f"{stem}[{_ranges(sorted(numbers), width)}]")
    return ",".join(parts)


def _ranges(numbers: list[int], width: int = 0) -> str:
    """[0, 1, 2, 5] -> 0-2,5 (each number zero-padded to `width`)."""
    found, start = [], None
    for i, number in enumerate(numbers):
        start = number if start is None else start
        if i + 1 == len(numbers) or numbers[i + 1] != number + 1:
            found.append(f"{start:0{width}d}" if start == number else f"{start:0{width}d}-{number:0{width}d}")
            start = None
    return ",".join(found)


def _stamp(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%S")


def _elapsed(seconds: float) -> str:
    seconds = max(int(seconds), 0)
    days, rest = divmod(seconds, 86400)
    hms = f"{rest // 3600:02d}:{rest % 3600 // 60:02d}:{rest % 60:02d}"
    return f"{days}-{hms}" if days else hms


def _job_record(
    *,
    job_id: int,
    name: str,
    user: tuple[str, int],
    hosts: list[str],
    bindings: list[tuple[str, list[int], list[int]]],
    started: float,
    now: float,
    command: str,
    log: str,
) -> str:
    """One job as `scontrol show job -d` prints it (Slurm 23.11): `bindings` are (host, CPU ids, GPU indices)."""
    cpus = sum(len(cpu) for _, cpu, _ in bindings)
    gpus = sum(len(gpu) for _, _, gpu in bindings)
    per_node = len(bindings[0][2]) if bindings else 0
    gres = f",gres/gpu={gpus}" if gpus else ""
    lines = [
        f"JobId={job_id} JobName={name}",
        f"   UserId={user[0]}({user[1]}) GroupId={user[0]}({user[1]}) MCS_label=N/A",
        "   Priority=4294901759 Nice=0 Account=research QOS=normal",
        "   JobState=RUNNING Reason=None Dependency=(null)",
        "   Requeue=1 Restarts=0 BatchFlag=1 Reboot=0 ExitCode=0:0",
        f"   RunTime={_elapsed(now - started)} TimeLimit=7-00:00:00 TimeMin=N/A",
        f"   SubmitTime={_stamp(started - 40)} EligibleTime={_stamp(started - 40)}",
        f"   AccrueTime={_stamp(started - 40)}",
        f"   StartTime={_stamp(started)} EndTime={_stamp(started + 7 * 86400)} Deadline=N/A",
        f"   SuspendTime=None SecsPreSuspend=0 LastSchedEval={_stamp(started)} Scheduler=Main",
        f"   Partition=gpu AllocNode:Sid={hosts[0]}:{job_id % 30000 + 1000}",
        "   ReqNodeList=(null) ExcNodeList=(null)",
        f"   NodeList={hostlist(hosts)}",
        f"   BatchHost={hosts[0]}",
        f"   NumNodes={len(hosts)} NumCPUs={cpus} NumTasks={gpus or len(hosts)} CPUs/Task=1 ReqB:S:C:T=0:0:*:*",
        f"   ReqTRES=cpu={cpus},node={len(hosts)},billing={cpus}{gres}",
        f"   AllocTRES=cpu={cpus},node={len(hosts)},billing={cpus}{gres}",
        f"   Socks/Node=* NtasksPerN:B:S:C={per_node}:0:*:* CoreSpec=*",
    ]
    if gpus:
        lines.append(f"   JOB_GRES=gpu:{gpus}")
    for host, cpu, gpu in bindings:  # one line per node here: the bindings differ per node only with the fault
        gres_text = f"gpu:{len(gpu)}(IDX:{_ranges(gpu)})" if gpu else ""
        lines.append(f"     Nodes={host} CPU_IDs={_ranges(cpu)} Mem=0 GRES={gres_text}")
    lines += [
        f"   MinCPUsNode={len(bindings[0][1]) if bindings else 1} MinMemoryNode=0 MinTmpDiskNode=0",
        "   Features=(null) DelayBoot=00:00:00",
        "   OverSubscribe=OK Contiguous=0 Licenses=(null) Network=(null)",  # not --exclusive: nodes may be shared
        f"   Command={command}",
        f"   WorkDir=/home/{user[0]}",
        f"   StdErr={log}",
        "   StdIn=/dev/null",
        f"   StdOut={log}",
    ]
    if per_node:
        lines.append(f"   TresPerNode=gres/gpu:{per_node}")
    return "\n".join(lines) + "\n"


def slurm_jobs(context: Context, now: float | None = None) -> CommandOutput:
    """Every Slurm training job of the cluster with its CPU and GPU binding per node, and on a node where the
    co_located fault placed one, the second trainer: the CPUs the job left and any GPU beyond the job's ranks."""
    now = clock.now() if now is None else now
    records = []
    for run in cluster_runs():
        if run.launcher != "slurm":
            continue
        states = job_states(context, run)
        job_id = slurm_job_id(run)
        bindings, shared = [], []
        for state in states:
            gpus = sorted(gpu.index for gpu in state.visible_gpus)
            held = max(state.cpu_count * 3 // 4, 1) if state.co_located_pod else state.cpu_count
            bindings.append((state.hostname, list(range(held)), gpus[: run.ranks_per_node]))
            if state.co_located_pod:
                shared.append((state, list(range(held, state.cpu_count)), gpus[run.ranks_per_node :]))
        if not bindings:
            continue
        records.append(
            _job_record(
                job_id=job_id,
                name=run.name,
                user=TRAINER,
                hosts=[host for host, _, _ in bindings],
                bindings=bindings,
                started=run.started,
                now=now,
                command=f"/home/{TRAINER[0]}/{run.name}.sbatch",
                log=run.log_path,
            )
        )
        for number, (state, cpus, gpus) in enumerate(shared, start=1):
            name, user, uid = CO_LOCATED_JOB
            records.append(
                _job_record(
                    job_id=job_id + number,
                    name=name,
                    user=(user, uid),
                    hosts=[state.hostname],
                    bindings=[(state.hostname, cpus, gpus)],
                    started=now - 40 * 60,
                    now=now,
                    command=f"/home/{user}/{name}.sbatch",
                    log=f"/home/{user}/{name}-%j.out",
                )
            )
    if not records:
        return ok("No jobs in the system\n")
    return ok("\n".join(records))


# --- kubectl apply -f FILE: a training job's resume ---------------------------------------------------------------


def _resume_of(job: dict) -> tuple[list[str], str, int]:
    """The nodes an Indexed Job is pinned to (completion index = node rank) and the checkpoint its trainer loads."""
    spec = job["spec"]["template"]["spec"]
    terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    hosts = next(
        expression["values"]
        for term in terms
        for expression in term["matchExpressions"]
        if expression["key"] == "kubernetes.io/hostname"
    )
    command = spec["containers"][0]["command"]
    return list(hosts), command[command.index("--load") + 1], int(command[command.index("--ckpt-step") + 1])


def apply_manifest(context: Context, path: str) -> CommandOutput:
    """A Job manifest written on the controller: `job.batch/NAME created` (or `unchanged` the second time), and
    its pods start on the nodes it names, one per completion index; anything else is kubectl's own error."""
    content = read_file(context, path)
    if content is None:
        return fail(1, f'error: the path "{path}" does not exist\n')
    try:
        job = yaml.safe_load(content)
        name = job["metadata"]["name"]
        kind = job["kind"]
    except (yaml.YAMLError, KeyError, TypeError):
        return fail(1, f"error: error parsing {path}: error converting YAML to JSON\n")
    if kind != "Job" or job.get("apiVersion") != "batch/v1":
        return fail(1, f'error: resource mapping not found for name: "{name}": the simulator applies batch/v1 Jobs\n')
    try:
        hosts, load, step = _resume_of(job)
    except (KeyError, IndexError, ValueError, StopIteration, TypeError):
        return fail(
            1, f'The Job "{name}" is invalid: the simulator runs Jobs pinned to nodes with --load/--ckpt-step\n'
        )
    if not all(_known(context, host) for host in hosts):
        return fail(
            1, f'Error from server (NotFound): nodes "{next(h for h in hosts if not _known(context, h))}" not found\n'
        )
    key = f"{RESUME}k8s-{name}"
    if f"{APPLIED}{name}" in context.state.files:
        return ok(f"job.batch/{name} unchanged\n")
    context.change(f"file:{APPLIED}{name}", content)
    for rank, host in enumerate(hosts):
        context.change(f"{key}:{rank}", {"nnodes": len(hosts), "load": load, "step": step, "host": host})
    return ok(f"job.batch/{name} created\n")


APPLIED = "/var/lib/kubelet/rackpilot-applied/"  # the simulated API server's record of the Jobs it has

COMMANDS = {"kubectl": kubectl, "scontrol": scontrol, "sinfo": slurmctld.sinfo}
