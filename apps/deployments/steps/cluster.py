"""Phase 3, cluster: the node as discovery and the topology rules see it, cgroup isolation for training work, and
NCCL pointed at the right interfaces (with an all-reduce to prove it)."""

from apps.deployments.choices import Outcome, Phase, Problem
from apps.deployments.steps.base import CouldNotRun, Finding, Step, call, excerpt, measured, parse, text_of
from apps.deployments.steps.hardware import query_gpus
from apps.deployments.steps.software import ConfigFile
from apps.parsers import network, nvidia_smi
from apps.parsers.errors import ParseError
from apps.parsers.nccl_log import parse_nccl_log, socket_ifname_selects
from apps.parsers.nccl_tests import parse_nccl_tests


class Topology(Step):
    name, label = "topology", "Topology"
    phase = Phase.CLUSTER
    acceptance = True
    description = "nvidia-smi topo -m shows every GPU and RDMA NIC, and the topology rules pass for this node."

    def reads(self, node):
        return [call("nvidia-smi-topo", "topo")]

    def judge(self, node, outputs):
        topo = parse(outputs, "topo", nvidia_smi.parse_topology)
        findings = [
            Finding(
                check="topo_devices",
                outcome=Outcome.PASS
                if len(topo.gpus) == node.gpu_count and len(topo.nics) >= len(node.rdma_nics)
                else Outcome.FAIL,
                value=f"{len(topo.gpus)} GPUs, {len(topo.nics)} NICs",
                criterion=f"{node.gpu_count} GPUs and at least {len(node.rdma_nics)} RDMA NICs in topo -m",
                evidence=excerpt(text_of(outputs, "topo"), limit=3),
                problem=Problem.GPU_MISSING if len(topo.gpus) != node.gpu_count else Problem.TOPOLOGY,
            )
        ]
        for title, verdict, detail in node.topology:
            findings.append(
                Finding(
                    check="topology_rule",
                    subject=title[:64],
                    outcome={"pass": Outcome.PASS, "warn": Outcome.WARN}.get(verdict, Outcome.FAIL),
                    value=verdict,
                    criterion=f"topology rule: {title}",
                    evidence=detail[:500],
                    problem="" if verdict in ("pass", "warn") else Problem.TOPOLOGY,
                )
            )
        for finding in findings:
            if finding.passed:
                finding.problem = ""
        return findings


class Discovery(Step):
    name, label = "discovery", "Matches the inventory"
    phase = Phase.CLUSTER
    acceptance = True
    description = "The GPUs (by UUID) and data NICs (by MAC) the node reports are the ones the inventory holds."

    def reads(self, node):
        return [call("nvidia-smi-query-gpu", "gpus"), call("ip-link", "links")]

    def judge(self, node, outputs):
        reported = {gpu.uuid: gpu for gpu in query_gpus(outputs) if gpu.uuid}
        findings = []
        for gpu in node.gpus:
            if not gpu.uuid:
                findings.append(
                    Finding(
                        check="gpu_identity",
                        subject=f"GPU{gpu.index}",
                        outcome=Outcome.WARN,
                        value="no UUID in the inventory",
                        criterion="the inventory's GPU UUID is reported",
                        evidence="run discovery and accept its facts to record the UUID",
                    )
                )
                continue
            found = reported.get(gpu.uuid)
            findings.append(
                Finding(
                    check="gpu_identity",
                    subject=f"GPU{gpu.index}",
                    outcome=Outcome.PASS if found else Outcome.FAIL,
                    value=gpu.uuid if found else "not reported",
                    criterion=f"nvidia-smi reports {gpu.uuid}",
                    evidence="" if found else f"reported: {', '.join(sorted(reported)) or 'none'}",
                    problem="" if found else Problem.INVENTORY_MISMATCH,
                )
            )
        links = {link.name: link for link in parse(outputs, "links", network.parse_ip_link).links}
        for nic in node.data_nics:
            link = links.get(nic.name)
            mac = (link.address or "").lower() if link else ""
            if not nic.mac:
                continue
            findings.append(
                Finding(
                    check="nic_identity",
                    subject=nic.name,
                    outcome=Outcome.PASS if mac == nic.mac else Outcome.FAIL,
                    value=mac or "no such interface",
                    expected=nic.mac,
                    criterion=f"{nic.name} has MAC {nic.mac}",
                    evidence=f"ip link: {nic.name} link/ether {mac}" if link else "",
                    problem="" if mac == nic.mac else Problem.INVENTORY_MISMATCH,
                )
            )
        return findings


class Cgroup(ConfigFile):
    name, label = "cgroup", "cgroup isolation"
    phase = Phase.CLUSTER
    then = ("daemon-reload",)
    description = "A systemd slice that keeps training work off the system's CPUs and memory, with GPU access."

    def file_path(self, node):
        return "/etc/systemd/system/" + node.option("cgroup", "slice")


def _nccl_warnings(text: str) -> list:
    try:
        return parse_nccl_log(text).warnings
    except ParseError:  # no NCCL debug lines (NCCL_DEBUG unset): nothing NCCL warned about
        return []


class NcclEnvironment(ConfigFile):
    name, label = "nccl-env", "NCCL environment"
    phase = Phase.CLUSTER
    path = "/etc/nccl.conf"
    acceptance = False
    retry_check = "nccl_busbw"
    description = (
        "/etc/nccl.conf with NCCL_SOCKET_IFNAME on interfaces the node has, then an all-reduce across its GPUs."
    )

    def reads(self, node):
        return super().reads(node) + [
            call("ip-link", "links"),
            call("nccl-allreduce", "allreduce", number=max(node.gpu_count, 1)),
        ]

    def judge(self, node, outputs):
        findings = [self.file_finding(node, outputs)]
        spec = str(node.option("nccl", "socket_ifname"))
        names = [link.name for link in parse(outputs, "links", network.parse_ip_link).links]
        if spec:
            matched = socket_ifname_selects(spec, names)
            findings.append(
                Finding(
                    check="nccl_socket_ifname",
                    subject=spec[:64],
                    outcome=Outcome.PASS if matched else Outcome.FAIL,
                    value=", ".join(matched) or "no interface",
                    criterion="NCCL_SOCKET_IFNAME selects at least one interface of the node",
                    evidence=f"interfaces on the node: {', '.join(names)}",
                    problem="" if matched else Problem.NCCL_SOCKET_IFNAME,
                )
            )
        output = outputs["allreduce"]
        warnings = _nccl_warnings(output.text)
        if not output.ok:
            bootstrap = [w for w in warnings if "bootstrap" in w.category or "interface" in w.category]
            findings.append(
                Finding(
                    check="nccl_allreduce",
                    outcome=Outcome.FAIL,
                    value="failed",
                    criterion="all_reduce_perf completes across the node's GPUs",
                    evidence=excerpt(output.text, "WARN", "failure", "NCCL_SOCKET_IFNAME") or output.reason,
                    problem=Problem.NCCL_SOCKET_IFNAME if bootstrap else Problem.NCCL_FAILURE,
                )
            )
            return findings
        result = parse(outputs, "allreduce", parse_nccl_tests)
        if not result.rows:
            raise CouldNotRun("all_reduce_perf printed no result rows")
        largest = max(result.rows, key=lambda row: row.size_bytes)
        busbw = largest.out_of_place.busbw_gb_per_s or 0.0
        findings.append(
            measured(
                "nccl_busbw",
                "",
                busbw,
                node.criteria["nccl_busbw"],
                problem=Problem.NCCL_SLOW,
                evidence=excerpt(output.text, "Avg bus bandwidth"),
            )
        )
        return findings
