"""Troubleshooting suggestions: for each known problem a failed check points to, what is wrong, the likely cause,
the next thing to check, and the fix. Written as an experienced cluster engineer would tell a colleague."""

from dataclasses import dataclass

from apps.deployments.choices import Problem
from apps.deployments.steps.base import Call, Finding, NodeContext


@dataclass(frozen=True)
class Advice:
    title: str  # {where} is replaced by the node and the subjects
    cause: str
    next_check: str
    fix: str


ADVICE: dict[Problem, Advice] = {
    # Cluster acceptance (apps/deployments/cluster.py) words its own suggestions from the benchmark's figures; these
    # are the general advice for each of its problems.
    Problem.SLOW_LINK: Advice(
        "Slow node or link across nodes on {where}",
        "The NCCL sweep named this node's link as slower than the fabric and the set's median, and confirmed it "
        "against a different known-good partner: a degraded cable, a NIC or switch port at a lower rate, CRC errors, "
        "or MTU/PFC off on that link.",
        "ethtool IF and ethtool -S IF on the node (speed, errors, pause frames); the switch port's counters",
        "Reseat or replace the cable, or move it to another port; then run cluster acceptance again.",
    ),
    Problem.CLUSTER_NCCL_SLOW: Advice(
        "Multi-node NCCL bus bandwidth low on {where}",
        "The nodes pass alone but not together: a slow NIC, cable or switch port, MTU or PFC somewhere on the path.",
        "Read the sweep's suspects; else run the pairwise NCCL suite on the set.",
        "Fix the link the sweep names; check NCCL_SOCKET_IFNAME, NCCL_IB_HCA and the GID index of the plan.",
    ),
    Problem.LINK_ERRORS: Advice(
        "Link errors on {where}",
        "The NIC's CRC/FCS or symbol error counters grew while multi-node NCCL ran: the cable, a transceiver or the "
        "switch port corrupts frames. RoCE resends them, so bandwidth barely drops, but the link is failing.",
        "ethtool -S IF | grep -E 'crc|symbol' on the node twice under traffic; the switch port's error counters",
        "Clean or reseat the transceivers, else replace the cable or move it to another port; then run cluster "
        "acceptance again.",
    ),
    Problem.HPL_LOW: Advice(
        "HPL-MxP below the reference on {where}",
        "Compute throughput under the SKU's reference: clocks held down by a power cap or heat, or a GPU behind.",
        "nvidia-smi -q -d PERFORMANCE,POWER,TEMPERATURE during the run (clocks-event reasons)",
        "Clear the cap or the cooling problem, then run cluster acceptance again.",
    ),
    Problem.XID79: Advice(
        "GPU fallen off the bus (XID 79) on {where}",
        "The GPU stopped answering on PCIe: XID 79 in the kernel log. Usually power or thermal trouble on the board, "
        "a badly seated GPU or riser, or a failing GPU; the driver has given up on it until the node restarts.",
        "dmesg | grep -i xid ; nvidia-smi -q | grep -A2 'Bus Id' ; ipmitool sel elist | tail -20 (power, PCIe)",
        "Drain the node and power-cycle it (a warm reboot is often not enough). If the GPU falls off again, reseat "
        "it or open an RMA with the serial from the inventory; clear the fault and resume once nvidia-smi shows it.",
    ),
    Problem.GPU_MISSING: Advice(
        "GPU missing on {where}",
        "nvidia-smi shows fewer GPUs than the inventory holds, with no XID 79 logged: the GPU may be disabled in the "
        "BIOS, not enumerated on PCIe, or the inventory may be wrong.",
        "lspci -d 10de: | wc -l ; dmesg | grep -i nvrm ; compare GPU serials with the inventory (run discovery)",
        "Check the BIOS PCIe settings and reseat the GPU; if the inventory is wrong, correct it through discovery.",
    ),
    Problem.GPU_MODEL: Advice(
        "GPU model differs from the inventory on {where}",
        "The node holds a different GPU model than the inventory's SKU: a wrong part shipped or a wrong inventory row.",
        "nvidia-smi -L",
        "Correct the inventory (discovery shows the difference) or swap the part.",
    ),
    Problem.HBM_LOW: Advice(
        "Low HBM bandwidth on {where}",
        "Device-local copy bandwidth below the SKU's reference: clocks held down (power or thermal cap), a GPU "
        "running in a low P-state, or degraded HBM.",
        "nvidia-smi -q -d PERFORMANCE,CLOCK,TEMPERATURE (clocks event reasons) ; dcgmi diag -r 3",
        "Clear the clock limit (cooling, power cap back to default); if it stays low with clocks at maximum, RMA.",
    ),
    Problem.NVLINK: Advice(
        "NVLink down or slow on {where}",
        "A GPU has inactive NVLinks or slow peer copies: an NVSwitch tray or baseboard link fault, or a link that "
        "did not train at boot.",
        "nvidia-smi nvlink -s ; nvidia-smi nvlink -e (error counters) ; dcgmi diag -r 2",
        "Reset the GPUs (nvidia-smi -r with the node drained) or reboot; if links stay down, the baseboard needs "
        "service.",
    ),
    Problem.PCIE_DOWNTRAINED: Advice(
        "PCIe link downtrained on {where}",
        "The GPU's PCIe link runs narrower or slower than its maximum: a riser or retimer problem, a dirty or loose "
        "connector, or a BIOS PCIe setting. Host-device copies and GPUDirect RDMA suffer.",
        "nvidia-smi -q -d PCIE (link width/gen current vs max) ; lspci -vv -s <bus> | grep -E 'LnkCap|LnkSta'",
        "Reseat the GPU/riser; check the BIOS slot settings; replace the riser if the width stays low.",
    ),
    Problem.ECC: Advice(
        "Uncorrectable ECC errors / row remap pending on {where}",
        "HBM reported uncorrectable errors; a remap is pending and only takes effect after a GPU reset. Jobs on this "
        "GPU may crash with XID 48/94/95 until then.",
        "nvidia-smi -q -d ECC,ROW_REMAPPER",
        "Drain the node and reset the GPU (nvidia-smi -r -i <gpu>) or reboot so the remap applies; if remapping "
        "fails or errors keep rising, RMA the GPU.",
    ),
    Problem.FIRMWARE_DRIFT: Advice(
        "Firmware not at the baseline on {where}",
        "The node runs a different firmware version than the plan's baseline: nodes of one cluster should match, "
        "or NCCL and RDMA behaviour differs between them.",
        "cat /sys/class/dmi/id/bios_version ; ipmitool mc info ; ethtool -i <nic> ; nvidia-smi -q | grep VBIOS",
        "Flash the baseline image (approve the fix below; BIOS needs a reboot to take effect), then resume.",
    ),
    Problem.NIC_DOWN: Advice(
        "NIC link down on {where}",
        "The data NIC has no link: cable or transceiver unplugged or faulty, or the switch port is shut.",
        "ethtool <nic> ; ethtool -m <nic> (optics) ; the leaf port's state in the inventory's cabling",
        "Reseat or replace the cable/transceiver; check the switch port is enabled; resume once the link is up.",
    ),
    Problem.NIC_SPEED: Advice(
        "NIC at the wrong speed on {where}",
        "The link came up slower than the NIC and switch support: a lower-rated cable, forced speed, or a lane fault.",
        "ethtool <nic> (Speed, Supported link modes) ; ethtool -m <nic>",
        "Replace the cable with one rated for the speed; undo any forced speed on the switch port.",
    ),
    Problem.MTU: Advice(
        "MTU mismatch on {where}",
        "The NIC is not at the plan's MTU while the fabric is: large frames are dropped or fragmented and NCCL over "
        "RoCE stalls or runs slow.",
        "ip link show <nic> ; ping -M do -s 8972 <peer on the same plane>",
        "Set the MTU (approve the fix below) and make it persistent in the node's network configuration.",
    ),
    Problem.RSS: Advice(
        "RSS queues not as planned on {where}",
        "The NIC spreads receive work over a different number of queues than planned.",
        "ethtool -l <nic>",
        "Set the combined channels (the step applies it).",
    ),
    Problem.PFC: Advice(
        "PFC off on the RDMA priority on {where}",
        "Priority flow control is not enabled on the RoCE priority (or the NIC does not trust DSCP): RoCE traffic "
        "drops under congestion and NCCL bandwidth collapses with retransmissions.",
        "mlnx_qos -i <nic> ; ethtool -S <nic> | grep -E 'prio3_pause|discard'",
        "Trust DSCP and enable PFC on the RDMA priority (approve the fix below); check the switch port matches.",
    ),
    Problem.ECN: Advice(
        "ECN off for RoCE on {where}",
        "ECN (DCQCN) is disabled for the RDMA priority: congestion is only handled by PFC pauses, which spread.",
        "cat /sys/class/net/<nic>/ecn/roce_np/enable/<prio> ; cat /sys/class/net/<nic>/ecn/roce_rp/enable/<prio>",
        "Enable ECN for the priority on the notification and reaction points (approve the fix below).",
    ),
    Problem.PTP: Advice(
        "Clock not synchronised on {where}",
        "chrony does not follow the PTP hardware clock: ptp4l/phc2sys not running, or no PTP grandmaster reachable "
        "on the management network. Logs and traces from the nodes will not line up.",
        "chronyc tracking ; chronyc sources ; systemctl status ptp4l phc2sys",
        "Start ptp4l and phc2sys (or chrony's PHC refclock) and check the grandmaster; resume once synchronised.",
    ),
    Problem.VERSION_DRIFT: Advice(
        "Software version differs from the plan on {where}",
        "The installed version is not the one the plan pins.",
        "nvidia-smi ; nvcc --version ; dpkg -l 'libnccl*' ; mpirun --version ; pip list",
        "Install the pinned version (the step does it; a driver change needs approval and a reboot).",
    ),
    Problem.CONFIG_MISSING: Advice(
        "Configuration file not in place on {where}",
        "The generated file is missing or differs, and writing it did not stick (read-only file system, or something "
        "else rewrites it, such as configuration management).",
        "ls -l <file> ; cat <file> ; mount | grep ' / '",
        "Find what rewrites the file and let it write the plan's content, then resume.",
    ),
    Problem.INVENTORY_MISMATCH: Advice(
        "Node differs from the inventory on {where}",
        "A GPU UUID or NIC MAC the inventory holds is not on the node: a part was swapped, cables or labels were "
        "mixed up between nodes, or the inventory row belongs to another machine.",
        "nvidia-smi -L ; ip -br link ; compare serials with the rack's labels",
        "Run discovery on the node and accept the differences that are right (a swapped part), or fix the "
        "labels/cabling; then resume.",
    ),
    Problem.TOPOLOGY: Advice(
        "Topology check failed on {where}",
        "The inventory's topology rules or the node's own view (topo -m) do not match the design: missing NIC, "
        "wrong NUMA affinity or not enough bandwidth to the rest of the cluster.",
        "nvidia-smi topo -m ; the topology page's failing rules for this node",
        "Fix the cabling or the inventory (run discovery), then resume.",
    ),
    Problem.NCCL_SOCKET_IFNAME: Advice(
        "NCCL_SOCKET_IFNAME points at a missing interface on {where}",
        'NCCL found no interface matching NCCL_SOCKET_IFNAME ("Bootstrap : no socket interface found"), so every '
        "NCCL job fails at start-up with an internal error.",
        "ip -br link ; grep NCCL_SOCKET_IFNAME /etc/nccl.conf ; NCCL_DEBUG=INFO all_reduce_perf -g 8",
        "Edit the deployment's NCCL_SOCKET_IFNAME to interfaces this node has (prefixes such as the data NICs' "
        "names), then resume: the file is rewritten and the all-reduce re-run.",
    ),
    Problem.NCCL_FAILURE: Advice(
        "NCCL all-reduce failed on {where}",
        "all_reduce_perf did not complete; the NCCL WARN lines in the evidence say which layer failed.",
        "NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET all_reduce_perf -b 8 -e 1G -f 2 -g 8",
        "Follow the WARN category (CUDA, IB/RoCE, socket), fix, then resume.",
    ),
    Problem.NCCL_SLOW: Advice(
        "NCCL bus bandwidth low on {where}",
        "The node's all-reduce is below the criterion: an NVLink fault, a straggling GPU (clocks held down), or "
        "NCCL picking the wrong transport.",
        "nvidia-smi nvlink -s ; nvidia-smi -q -d PERFORMANCE ; NCCL_DEBUG=INFO (look at 'via P2P/NVLS')",
        "Fix the slow GPU or link, then resume.",
    ),
    Problem.CHECKPOINT_MOUNT: Advice(
        "Checkpoint storage not mounted on {where}",
        "The storage tier chosen for checkpoints is not mounted: checkpoints would land on the boot disk.",
        "findmnt <mount> ; systemctl status <mount unit>",
        "Mount the storage tier (fstab or automount), then resume.",
    ),
    Problem.DISK_FULL: Advice(
        "Checkpoint storage nearly full on {where}",
        "The checkpoint file system has too little free space: the next checkpoint will fail mid-write and leave a "
        "corrupt file.",
        "df -h <mount> ; du -sh <mount>/* | sort -h | tail",
        "Free space (keep the last checkpoints only) or move checkpoints to a bigger tier.",
    ),
}


def suggestions_for(
    *, hostname: str, step, node: NodeContext, findings: list[Finding], fixes: list[Call]
) -> list[dict]:
    """One suggestion per problem the step's failing findings point to, on this node."""
    by_problem: dict[Problem, list[Finding]] = {}
    for finding in findings:
        if not finding.passed and finding.problem:
            by_problem.setdefault(Problem(finding.problem), []).append(finding)
    suggestions = []
    for problem, items in by_problem.items():
        advice = ADVICE[problem]  # every Problem has its advice (tests/deployments/test_steps.py)
        subjects = sorted({finding.subject for finding in items if finding.subject})
        # A NIC subject names its cable's far end, so the engineer at the rack knows which port to look at.
        peers = {nic.name: nic.peer for nic in node.data_nics if nic.peer}
        named = [f"{subject}, cabled to {peers[subject]}" if subject in peers else subject for subject in subjects]
        where = hostname + (f" ({'; '.join(named[:6])})" if named else "")
        suggestions.append(
            {
                "hostname": hostname,
                "step": step.name,
                "problem": problem,
                "subject": ", ".join(subjects)[:64],
                "title": advice.title.format(where=where)[:200],
                "cause": advice.cause,
                "next_check": _with_the_nic(
                    advice.next_check, [s for s in subjects if s in {n.name for n in node.data_nics}]
                ),
                "fix": advice.fix,
                "fix_commands": [fix.display() for fix in fixes],
                "remediation_step": step.name if fixes else "",
                "disruptive": bool(fixes) and step.disruptive,
                "evidence": "\n".join(filter(None, (finding.evidence for finding in items)))[:4000],
            }
        )
    return suggestions


def _with_the_nic(text: str, nics: list[str]) -> str:
    """The advice's <nic> as the NIC the finding is about ("ethtool ens3np0"), never the placeholder."""
    if "<nic>" not in text or not nics:
        return text
    return text.replace("<nic>", nics[0]) + (f" (and the same on {', '.join(nics[1:])})" if nics[1:] else "")
