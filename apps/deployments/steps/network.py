"""Phase 1, network: data NIC links up at their speed, the plan's jumbo MTU end to end, RSS queues, RoCE with PFC on
the RDMA priority and ECN, and the clock synchronised by PTP."""

import base64

from apps.core.units import link_rate
from apps.deployments.choices import Outcome, Problem
from apps.deployments.options import PLAN_DEFAULTS
from apps.deployments.steps.base import CouldNotRun, Finding, Step, call, equal, excerpt, measured, parse, text_of
from apps.parsers import network, provisioning


def ecn_path(interface: str, point: str, priority: int) -> str:
    return f"/sys/class/net/{interface}/ecn/{point}/enable/{priority}"


def write_file(path: str, content: str, key: str = ""):
    return call("write-file", key or f"write:{path}", base64=base64.b64encode(content.encode()).decode(), path=path)


class NicLinks(Step):
    name, label = "links", "Data NIC links"
    acceptance = True
    description = "Every data NIC has link, at the speed the inventory says."

    def applies_to(self, node):
        return bool(node.data_nics)

    def reads(self, node):
        return [call("ethtool", f"nic:{nic.name}", interface=nic.name) for nic in node.data_nics]

    def judge(self, node, outputs):
        findings = []
        for nic in node.data_nics:
            settings = parse(outputs, f"nic:{nic.name}", network.parse_ethtool)
            evidence = excerpt(text_of(outputs, f"nic:{nic.name}"), "Speed:", "Link detected:")
            if not settings.link_detected:
                findings.append(
                    Finding(
                        check="nic_link",
                        subject=nic.name,
                        outcome=Outcome.FAIL,
                        value="no link",
                        criterion="Link detected: yes",
                        evidence=evidence,
                        problem=Problem.NIC_DOWN,
                    )
                )
                continue
            speed = (settings.speed_mbps or 0) // 1000
            findings.append(
                equal(
                    "nic_speed",
                    nic.name,
                    link_rate(speed),
                    link_rate(nic.speed_gbps),
                    what="link speed",
                    problem=Problem.NIC_SPEED,
                    evidence=evidence,
                )
            )
        return findings


class Mtu(Step):
    name, label = "mtu", "MTU on data NICs"
    disruptive = True  # changing the MTU restarts the NIC's queues: traffic on it stops for a moment
    description = (
        f"Every data NIC at the plan's MTU ({PLAN_DEFAULTS['network']['mtu']} unless edited), as the switch ports are."
    )

    def applies_to(self, node):
        return bool(node.data_nics)

    def reads(self, node):
        return [call("ip-link", "links")]

    def judge(self, node, outputs):
        wanted = node.option("network", "mtu")
        links = {link.name: link for link in parse(outputs, "links", network.parse_ip_link).links}
        findings = []
        for nic in node.data_nics:
            link = links.get(nic.name)
            if link is None:
                raise CouldNotRun(f"ip link shows no {nic.name}")
            findings.append(
                equal(
                    "mtu",
                    nic.name,
                    link.mtu,
                    wanted,
                    what="MTU",
                    problem=Problem.MTU,
                    evidence=f"{link.index}: {nic.name}: <{','.join(link.flags)}> mtu {link.mtu} state {link.state}",
                )
            )
        return findings

    def fixes(self, node, findings):
        wanted = node.option("network", "mtu")
        names = (
            [nic.name for nic in node.data_nics] if findings is None else [f.subject for f in findings if not f.passed]
        )
        return [call("set-mtu", f"mtu:{name}", interface=name, number=wanted) for name in names]


class RssQueues(Step):
    name, label = "rss", "RSS queues"
    description = "Combined RSS channels on each data NIC as the plan says (capped at what the NIC offers)."

    def applies_to(self, node):
        return bool(node.data_nics)

    def reads(self, node):
        return [call("ethtool-channels", f"nic:{nic.name}", interface=nic.name) for nic in node.data_nics]

    def _wanted(self, node, channels) -> int:
        wanted = node.option("network", "rss_queues")
        maximum = channels.maximum.get("combined")
        return min(wanted, maximum) if maximum else wanted

    def judge(self, node, outputs):
        findings = []
        for nic in node.data_nics:
            channels = parse(outputs, f"nic:{nic.name}", provisioning.parse_ethtool_channels)
            findings.append(
                equal(
                    "rss_queues",
                    nic.name,
                    channels.current.get("combined"),
                    self._wanted(node, channels),
                    what="combined channels",
                    problem=Problem.RSS,
                    evidence=f"{nic.name}: Combined max {channels.maximum.get('combined')}, "
                    f"current {channels.current.get('combined')}",
                )
            )
        return findings

    def fixes(self, node, findings):
        wanted = node.option("network", "rss_queues")
        if findings is None:
            return [call("set-channels", f"rss:{n.name}", interface=n.name, number=wanted) for n in node.data_nics]
        return [
            call("set-channels", f"rss:{f.subject}", interface=f.subject, number=int(f.expected))
            for f in findings
            if not f.passed
        ]


class Roce(Step):
    name, label = "roce", "RoCE: PFC and ECN"
    disruptive = True  # QoS changes renegotiate DCBX with the switch port
    description = "Trust DSCP, PFC on the RDMA priority only, ECN enabled for it (notification and reaction points)."

    def applies_to(self, node):
        return bool(node.rdma_nics)

    def _priority(self, node) -> int:
        return int(node.option("network", "rdma_priority"))

    def reads(self, node):
        priority = self._priority(node)
        calls = []
        for nic in node.rdma_nics:
            calls.append(call("mlnx-qos", f"qos:{nic.name}", interface=nic.name))
            if node.option("network", "ecn"):
                calls.append(call("read-file", f"ecn:{nic.name}", path=ecn_path(nic.name, "roce_np", priority)))
        return calls

    def judge(self, node, outputs):
        priority = self._priority(node)
        wanted = [index == priority for index in range(8)]
        findings = []
        for nic in node.rdma_nics:
            qos = parse(outputs, f"qos:{nic.name}", network.parse_mlnx_qos)
            text = text_of(outputs, f"qos:{nic.name}")
            good = qos.trust == "dscp" and list(qos.pfc_enabled) == wanted
            findings.append(
                Finding(
                    check="pfc",
                    subject=nic.name,
                    outcome=Outcome.PASS if good else Outcome.FAIL,
                    value=f"trust {qos.trust}, PFC on {[i for i, on in enumerate(qos.pfc_enabled) if on] or 'none'}",
                    criterion=f"trust dscp and PFC on priority {priority} only",
                    evidence=excerpt(text, "trust", "enabled", "Priority trust"),
                    problem="" if good else Problem.PFC,
                )
            )
            if node.option("network", "ecn"):
                flag = text_of(outputs, f"ecn:{nic.name}").strip()
                enabled = flag == "1"
                findings.append(
                    Finding(
                        check="ecn",
                        subject=nic.name,
                        outcome=Outcome.PASS if enabled else Outcome.FAIL,
                        value="enabled" if enabled else "disabled",
                        criterion=f"ECN enabled on priority {priority}",
                        evidence=f"{ecn_path(nic.name, 'roce_np', priority)}: {flag}",
                        problem="" if enabled else Problem.ECN,
                    )
                )
        return findings

    def fixes(self, node, findings):
        priority = self._priority(node)
        mask = ",".join("1" if index == priority else "0" for index in range(8))
        failing = None if findings is None else {(f.check, f.subject) for f in findings if not f.passed}
        calls = []
        for nic in node.rdma_nics:
            if failing is None or ("pfc", nic.name) in failing:
                calls.append(call("set-qos", f"qos:{nic.name}", interface=nic.name, pfc_mask=mask))
            if failing is None or ("ecn", nic.name) in failing:
                for point in ("roce_np", "roce_rp"):
                    calls.append(write_file(ecn_path(nic.name, point, priority), "1"))
        return calls


class Ptp(Step):
    name, label = "ptp", "PTP clock sync"
    acceptance = True
    retry_check = "ptp_offset"
    description = "The clock follows the NIC's PTP hardware clock (chrony), within the plan's offset."

    def reads(self, node):
        return [call("chronyc-tracking", "tracking")]

    def judge(self, node, outputs):
        tracking = parse(outputs, "tracking", provisioning.parse_chrony_tracking)
        evidence = excerpt(text_of(outputs, "tracking"), "Reference ID", "System time", "Leap status")
        if not tracking.synchronised:
            return [
                Finding(
                    check="ptp_offset",
                    outcome=Outcome.FAIL,
                    value=tracking.leap_status,
                    criterion="chrony synchronised to a PTP hardware clock",
                    evidence=evidence,
                    problem=Problem.PTP,
                )
            ]
        return [
            measured(
                "ptp_offset",
                "",
                abs(tracking.system_offset_ns),
                node.criteria["ptp_offset"],
                problem=Problem.PTP,
                evidence=evidence,
            )
        ]
