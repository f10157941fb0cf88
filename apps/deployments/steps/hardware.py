"""Phase 1, hardware acceptance: GPUs as inventoried, HBM and NVLink bandwidth, PCIe links, ECC and row remapping,
and firmware at the plan's baselines."""

from apps.deployments.catalogue import firmware_image
from apps.deployments.choices import Outcome, Problem
from apps.deployments.steps.base import (
    CouldNotRun,
    Finding,
    Output,
    Step,
    call,
    equal,
    excerpt,
    measured,
    parse,
    text_of,
)
from apps.parsers import network, nvbandwidth, nvidia_smi, provisioning
from apps.parsers.dmesg import parse_dmesg


def query_gpus(outputs: dict[str, Output]) -> list:
    report = parse(outputs, "gpus", lambda text: nvidia_smi.parse_query_gpu(text, nvidia_smi.QUERY_GPU_FIELDS))
    return report.gpus


class GpuInventory(Step):
    name, label = "gpus", "GPU count and model"
    acceptance = True
    description = "Every inventoried GPU answers nvidia-smi and is the SKU the inventory says."

    def reads(self, node):
        return [call("nvidia-smi-query-gpu", "gpus"), call("dmesg")]

    def judge(self, node, outputs):
        gpus = query_gpus(outputs)
        log = outputs.get("dmesg")
        xids = parse_dmesg(log.text).xids if log is not None and log.ok and log.text.strip() else []
        lost = [event for event in xids if event.xid == 79]
        problem = Problem.XID79 if lost else Problem.GPU_MISSING
        evidence = "\n".join(f"XID {event.xid} on {event.pci_bus_id}: {event.meaning or ''}" for event in lost[:4])
        findings = [
            equal(
                "gpu_count",
                "",
                len(gpus),
                node.gpu_count,
                what="GPUs visible to nvidia-smi",
                problem=problem,
                evidence=evidence or excerpt(text_of(outputs, "gpus"), limit=8),
            )
        ]
        model = node.sku.split()[0]
        for gpu in gpus:
            findings.append(
                Finding(
                    check="gpu_model",
                    subject=f"GPU{gpu.index}",
                    outcome=Outcome.PASS if model in (gpu.name or "") else Outcome.FAIL,
                    value=gpu.name or "",
                    criterion=f"name contains {model} (inventory SKU {node.sku})",
                    problem=Problem.GPU_MODEL,
                )
            )
        return findings


class HbmBandwidth(Step):
    name, label = "hbm", "HBM bandwidth"
    acceptance = True
    retry_check = "hbm_bandwidth"
    description = "nvbandwidth device_local_copy on every GPU against the SKU's reference copy bandwidth."

    def reads(self, node):
        return [call("nvbandwidth-hbm", "hbm")]

    def judge(self, node, outputs):
        report = parse(outputs, "hbm", nvbandwidth.parse_nvbandwidth)
        case = next((case for case in report.testcases if case.name == "device_local_copy"), None)
        if case is None or not case.matrix:
            raise CouldNotRun("nvbandwidth printed no device_local_copy result")
        criterion = dict(node.criteria["hbm_bandwidth"], reference_value=node.hbm_reference_gb_per_s)
        return [
            measured(
                "hbm_bandwidth",
                f"GPU{index}",
                value,
                criterion,
                problem=Problem.HBM_LOW,
                evidence=f"nvbandwidth device_local_copy GPU {index}: {value:.2f} GB/s",
            )
            for index, value in enumerate(case.matrix[0])
            if value is not None
        ]


class NvlinkBandwidth(Step):
    name, label = "nvlink", "NVLink bandwidth"
    acceptance = True
    retry_check = "nvlink_bandwidth"
    description = "Every NVLink active, and GPU-to-GPU copies at or above the plan's NVLink bandwidth."

    def applies_to(self, node):
        return node.nvlink_gb_per_s > 0 and node.gpu_count > 1

    def reads(self, node):
        return [call("nvidia-smi-nvlink", "links"), call("nvbandwidth-nvlink", "peers")]

    def judge(self, node, outputs):
        status = parse(outputs, "links", nvidia_smi.parse_nvlink_status)
        findings = []
        for gpu in status.gpus:
            down = [link.link for link in gpu.links if not link.active]
            findings.append(
                Finding(
                    check="nvlink_links",
                    subject=f"GPU{gpu.index}",
                    outcome=Outcome.FAIL if down else Outcome.PASS,
                    value=f"{len(gpu.links) - len(down)} of {len(gpu.links)} active",
                    criterion="every NVLink active",
                    evidence=", ".join(f"Link {link}: <inactive>" for link in down),
                    problem=Problem.NVLINK if down else "",
                )
            )
        report = parse(outputs, "peers", nvbandwidth.parse_nvbandwidth)
        case = next((case for case in report.testcases if case.matrix), None)
        if case is None:
            raise CouldNotRun("nvbandwidth printed no GPU-to-GPU matrix")
        for index, row in enumerate(case.matrix):
            values = [value for value in row if value is not None]
            if not values:
                continue
            slowest = min(values)
            peer = row.index(slowest)
            # nvbandwidth reports one direction while both run; NVLink bandwidth is quoted for both together.
            findings.append(
                measured(
                    "nvlink_bandwidth",
                    f"GPU{index}",
                    2 * slowest,
                    node.criteria["nvlink_bandwidth"],
                    problem=Problem.NVLINK,
                    evidence=f"{case.name}: GPU {index} <-> GPU {peer} {slowest:.2f} GB/s each way "
                    f"(slowest peer; {2 * slowest:.1f} GB/s both directions)",
                )
            )
        return findings


class PcieLinks(Step):
    name, label = "pcie", "PCIe links"
    acceptance = True
    description = "Each GPU's PCIe link at its full width and generation."

    def reads(self, node):
        return [call("nvidia-smi-query-gpu", "gpus")]

    def judge(self, node, outputs):
        findings = []
        for gpu in query_gpus(outputs):
            value = f"Gen{gpu.pcie_gen_current} x{gpu.pcie_width_current}"
            full = f"Gen{gpu.pcie_gen_max} x{gpu.pcie_width_max}"
            if (gpu.pcie_width_current or 0) < (gpu.pcie_width_max or 16):
                outcome = Outcome.FAIL
            elif (gpu.pcie_gen_current or 0) < (gpu.pcie_gen_max or node.pcie_gen):
                outcome = Outcome.WARN  # an idle GPU may train its link down to save power; the width never drops
            else:
                outcome = Outcome.PASS
            findings.append(
                Finding(
                    check="pcie_link",
                    subject=f"GPU{gpu.index}",
                    outcome=outcome,
                    value=value,
                    criterion=f"link at its maximum {full} (a lower generation at idle only warns)",
                    evidence=f"GPU {gpu.index} {gpu.pci_bus_id}: pcie.link current {value}, max {full}",
                    problem=Problem.PCIE_DOWNTRAINED if outcome == Outcome.FAIL else "",
                )
            )
        return findings


class EccClean(Step):
    name, label = "ecc", "ECC and row remapping"
    acceptance = True
    description = "No uncorrectable ECC errors and no row remap pending (a pending remap needs a GPU reset)."

    def reads(self, node):
        return [call("nvidia-smi-q-xml", "gpus")]

    def judge(self, node, outputs):
        report = parse(outputs, "gpus", nvidia_smi.parse_query_xml)
        findings = []
        for number, gpu in enumerate(report.gpus):
            index = gpu.index if gpu.index is not None else number
            errors = gpu.ecc_errors_uncorrected_volatile or 0
            pending = bool(gpu.remapped_rows_pending)
            bad = errors > 0 or pending
            findings.append(
                Finding(
                    check="ecc",
                    subject=f"GPU{index}",
                    outcome=Outcome.FAIL if bad else Outcome.PASS,
                    value=f"{errors} uncorrectable, remap pending {'yes' if pending else 'no'}",
                    criterion="0 uncorrectable volatile ECC errors and no row remap pending",
                    evidence=f"GPU {index} {gpu.pci_bus_id}: Volatile DRAM Uncorrectable {errors}; "
                    f"Remapped Rows Pending {'Yes' if pending else 'No'}",
                    problem=Problem.ECC if bad else "",
                )
            )
        return findings


class Firmware(Step):
    name, label = "firmware", "Firmware at baseline"
    disruptive = True
    reboot_after_fix = True  # a flashed BIOS, BMC or VBIOS image runs from the next boot
    description = (
        "BIOS, BMC, GPU VBIOS and NIC firmware at the baselines chosen in the wizard; flashing needs approval."
    )

    def _baselines(self, node) -> dict:
        return {key: value for key, value in (node.options.get("baselines") or {}).items() if value}

    def reads(self, node):
        calls = [call("bios-version", "bios"), call("ipmitool-mc-info", "bmc"), call("nvidia-smi-query-gpu", "gpus")]
        calls += [call("ethtool-driver", f"nic:{nic.name}", interface=nic.name) for nic in node.data_nics]
        return calls

    def judge(self, node, outputs):
        baselines = self._baselines(node)
        findings = []
        if "bios" in baselines:
            bios = text_of(outputs, "bios").strip()
            findings.append(self._compare("bios", "BIOS", bios, baselines["bios"], f"bios_version: {bios}"))
        if "bmc" in baselines:
            bmc = parse(outputs, "bmc", provisioning.parse_ipmitool_mc_info).firmware_revision
            findings.append(self._compare("bmc", "BMC", bmc, baselines["bmc"], f"Firmware Revision : {bmc}"))
        if "gpu_vbios" in baselines:
            for gpu in query_gpus(outputs):
                findings.append(
                    self._compare(
                        "gpu_vbios",
                        f"GPU{gpu.index}",
                        gpu.vbios_version,
                        baselines["gpu_vbios"],
                        f"GPU {gpu.index} vbios_version {gpu.vbios_version}",
                    )
                )
        if "nic_firmware" in baselines:
            for nic in node.data_nics:
                driver = parse(outputs, f"nic:{nic.name}", network.parse_ethtool_driver)
                version = (driver.firmware_version or "").split()[0]
                findings.append(
                    self._compare(
                        "nic_firmware",
                        nic.name,
                        version,
                        baselines["nic_firmware"],
                        f"{nic.name} firmware-version: {driver.firmware_version}",
                    )
                )
        return findings

    def _compare(self, component: str, subject: str, value, baseline: str, evidence: str) -> Finding:
        finding = equal(
            f"firmware_{component}",
            subject,
            value,
            baseline,
            what=f"{component.replace('_', ' ')} version",
            problem=Problem.FIRMWARE_DRIFT,
            evidence=evidence,
        )
        return finding

    def fixes(self, node, findings):
        baselines = self._baselines(node)
        components = (
            list(baselines)
            if findings is None
            else sorted({f.check.removeprefix("firmware_") for f in findings if not f.passed})
        )
        return [
            call("flash-firmware", f"flash:{component}", path=firmware_image(component, baselines[component]))
            for component in components
            if component in baselines
        ]
