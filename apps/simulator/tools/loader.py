"""What a node shows about its mounts, its I/O pressure and its trainers' data loaders: `findmnt -J --list -o
TARGET,SOURCE,FSTYPE,OPTIONS`, `/proc/pressure/io` and `ps -eo pid,ppid,stat,comm,args`, and the kernel's lines
for storage that stopped answering (read by the kernel log).

The model: each training run on the node has its torchrun agent, one trainer process per local rank and, under
each trainer, its DataLoader's workers (`pt_data_worker`, LOADER_WORKERS of them). A starving data loader
(`dataloader_stall`) is the misconfigured one: a single worker per trainer. A stalled mount (`storage_slow`: the
NFS or Lustre server stops answering, or the local array hangs) leaves every worker reading from it in state D and
the trainers waiting, and the node's I/O pressure near 100 % of the time (PSI `some` and `full`).
"""

from apps.simulator.model import noise
from apps.simulator.state import KERNEL_RELEASE, SimulatedNode, SimVolume
from apps.simulator.terminal import CommandOutput, Context, fail, ok
from apps.simulator.tools.common import util_linux_json
from apps.simulator.tools.storage import _filesystem
from apps.simulator.training import SCRIPT, TrainingRun, runs_on

LOADER_WORKERS = 8  # num_workers of a well-fed rank (one per CPU core of its NUMA node's share, capped)
STARVED_WORKERS = 1
PSI_PATH = "/proc/pressure/io"

_FSTYPE = {"system": "ext4", "hot": "xfs", "warm": "lustre", "cold": "nfs4"}
_OPTIONS = {
    "system": "rw,relatime",
    "hot": "rw,noatime,attr2,inode64,logbufs=8,logbsize=32k,sunit=1024,swidth=4096,noquota",
    "warm": "rw,flock,lazystatfs,encrypt",
    "cold": "rw,relatime,vers=4.2,rsize=1048576,wsize=1048576,namlen=255,hard,proto=tcp,nconnect=16,timeo=600,"
    "retrans=2,sec=sys,local_lock=none",
}


def stalled(state: SimulatedNode) -> list[SimVolume]:
    return [volume for volume in state.volumes if volume.stalled]


# --- findmnt ----------------------------------------------------------------------------------------------------


def findmnt(context: Context, argv: list[str]) -> CommandOutput:
    if argv[1:] != ["-J", "--list", "-o", "TARGET,SOURCE,FSTYPE,OPTIONS"]:
        return fail(1, "findmnt: the simulator answers findmnt -J --list -o TARGET,SOURCE,FSTYPE,OPTIONS\n")
    entries = [
        {"target": "/boot/efi", "source": "/dev/nvme0n1p1", "fstype": "vfat", "options": "rw,relatime,fmask=0077"}
    ]
    for volume in context.state.volumes:
        entries.append(
            {
                "target": volume.mount_point,
                "source": _filesystem(volume),
                "fstype": _FSTYPE.get(volume.kind, "ext4"),
                "options": _OPTIONS.get(volume.kind, "rw,relatime"),
            }
        )
    entries.sort(key=lambda entry: (entry["target"] != "/", entry["target"]))
    return ok(util_linux_json({"filesystems": entries}) + "\n")


# --- /proc/pressure/io ------------------------------------------------------------------------------------------


def pressure(context: Context) -> str:
    """PSI for io: a busy-but-healthy node stalls on I/O a fraction of a percent of the time; with a stalled mount
    the loader workers are blocked on it nearly all the time (some), and the trainers with them (full)."""
    draw = noise(context.seed, context.hostname, "psi")
    hung = bool(stalled(context.state))
    uptime_us = 86_400 * 1_000_000
    lines = []
    for kind, (low, high) in (
        ("some", (90.0, 99.5) if hung else (0.0, 0.9)),
        ("full", (80.0, 97.0) if hung else (0.0, 0.4)),
    ):
        averages = [draw.uniform(low, high) for _ in range(3)]
        averages[2] = averages[2] * 0.7 if hung else averages[2]  # the 300 s window still holds the healthy past
        total = int(uptime_us * draw.uniform(0.0005, 0.004)) + (int(600e6 * averages[1] / 100) if hung else 0)
        lines.append(f"{kind} avg10={averages[0]:.2f} avg60={averages[1]:.2f} avg300={averages[2]:.2f} total={total}")
    return "\n".join(lines) + "\n"


# --- ps -----------------------------------------------------------------------------------------------------------


def _pid(context: Context, run: TrainingRun, *words) -> int:
    return 20_000 + noise(context.seed, context.hostname, run.name, *words).randrange(1000, 60000)


def trainer_processes(context: Context) -> list[tuple[int, int, str, str, str]]:
    """(pid, ppid, stat, comm, args) of the training runs' processes on this node."""
    state = context.state
    workers = STARVED_WORKERS if state.dataloader_stall else LOADER_WORKERS
    hung = bool(stalled(state))
    rows = []
    for run in runs_on(context.hostname):
        if context.hostname not in run.hosts:
            continue
        agent = _pid(context, run, "agent")
        rank0 = run.hosts[0]
        torchrun = (
            f"/usr/bin/python3 /usr/local/bin/torchrun --nnodes {len(run.hosts)} --nproc-per-node "
            f"{run.ranks_per_node} --node-rank {run.hosts.index(context.hostname)} --rdzv-backend c10d "
            f"--rdzv-endpoint {rank0}:29500 {SCRIPT}"
        )
        rows.append((agent, 1, "Ssl", "torchrun", torchrun))
        args = f"/usr/bin/python3 -u {SCRIPT} --load {run.checkpoint_dir}"
        for local in range(run.ranks_per_node):
            trainer = agent + 1 + local * (workers + 1)
            rows.append((trainer, agent, "Sl" if hung else "Rl", "python3", args))
            for worker in range(workers):
                rows.append((trainer + 1 + worker, trainer, "D" if hung else "S", "pt_data_worker", args))
    return rows


def first_worker(context: Context) -> int | None:
    """The pid of the first DataLoader worker on this node (the one a hung-task warning names)."""
    return next((pid for pid, _, _, comm, _ in trainer_processes(context) if comm == "pt_data_worker"), None)


def ps(context: Context, argv: list[str]) -> CommandOutput:
    if argv[1:] != ["-eo", "pid,ppid,stat,comm,args"]:
        return fail(1, "error: the simulator answers ps -eo pid,ppid,stat,comm,args\n")
    rows = [
        (1, 0, "Ss", "systemd", "/sbin/init"),
        (912, 1, "Ss", "sshd", "sshd: /usr/sbin/sshd -D [listener] 0 of 10-100 startups"),
        (
            1187,
            1,
            "Ssl",
            "nv-fabricmanager",
            "/usr/bin/nv-fabricmanager -c /usr/share/nvidia/nvswitch/fabricmanager.cfg",
        ),
        (1203, 1, "Ssl", "nvidia-persiste", "/usr/bin/nvidia-persistenced --user nvidia-persistenced"),
        *trainer_processes(context),
    ]
    lines = [f"{'PID':>7} {'PPID':>7} STAT {'COMMAND':<15} COMMAND"]
    lines += [f"{pid:>7} {ppid:>7} {stat:<4} {comm[:15]:<15} {args}" for pid, ppid, stat, comm, args in rows]
    return ok("\n".join(lines) + "\n")


# --- the kernel log -----------------------------------------------------------------------------------------------


def stall_lines(context: Context) -> list[str]:
    """The kernel's words for each stalled mount: the NFS client's `server … not responding`, Lustre's lost
    connection to an OST, then the hung-task warning for a DataLoader worker blocked on it."""
    lines = []
    for volume in stalled(context.state):
        source = _filesystem(volume)
        server = source.split(":", 1)[0]
        if volume.kind == "cold":
            lines += [f"nfs: server {server} not responding, still trying"] * 2
        elif volume.kind == "warm":
            fsname = volume.mount_point.strip("/").split("/")[0] or "lustre"
            target = f"{fsname}-OST000{noise(context.seed, context.hostname, volume.mount_point).randrange(8)}"
            lines.append(
                f"Lustre: {target}-osc-ffff9a1c4e8d1000: Connection to {target} (at {server}) was lost; in progress "
                "operations using this service will wait for recovery to complete"
            )
        pid = first_worker(context)
        if pid is not None:
            lines += [
                f"INFO: task pt_data_worker:{pid} blocked for more than 122 seconds.",
                f"      Not tainted {KERNEL_RELEASE} #63~22.04.1-Ubuntu",
                '"echo 0 > /proc/sys/kernel/hung_task_timeout_secs" disables this message.',
            ]
    return lines


COMMANDS = {"findmnt": findmnt, "ps": ps}
