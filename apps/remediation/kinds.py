"""The `repair-evidence` job kind: what a repair keeps from its node before anyone reboots it (docs/health.md,
"Repair and return"). Two read-only steps on the node: NVIDIA's bug report (the tool may be absent: the packet says
so, the step does not fail) and the kernel log, of which the lines about the GPUs and PCIe (Xid, NVRM, AER) are kept.
The packet is written on the repair when the shard ends (apps/remediation/repairs.py, record_evidence)."""

import re

from rest_framework import serializers

from apps.core.text import counted
from apps.deployments import commands as deployment_commands  # noqa: F401  (registers `dmesg`)
from apps.jobs.choices import StepStatus
from apps.jobs.events import emit
from apps.jobs.kinds import CellRecord, JobKind, StepSpec, default_status, default_summary, register_kind
from apps.nodeexec.catalogue import CATALOGUE, Command, register_command
from apps.remediation import repairs
from apps.remediation.models import Repair

BUG_REPORT_FILE = "/var/tmp/rackpilot-nvidia-bug-report.log"  # the tool adds .gz
NOT_INSTALLED = 127  # the shell's "command not found"
FAULT_LINE = re.compile(r"NVRM|Xid|\bAER\b|PCIe Bus Error|fallen off the bus")
KERNEL_LINES_KEPT = 200
OUTPUT_KEPT = 4000  # characters of the bug report's own output (the log itself stays on the node, named by path)

if "nvidia-bug-report" not in CATALOGUE:
    register_command(
        Command(
            "nvidia-bug-report",
            ("nvidia-bug-report.sh", "--safe-mode", "--output-file", BUG_REPORT_FILE),
            "NVIDIA's bug report (driver state, GPU and kernel logs) into a file on the node, before any reboot.",
            timeout=600,
            root=True,
        )
    )


class EvidenceParameters(serializers.Serializer):
    repair = serializers.UUIDField(help_text="The repair the packet is for.")


@register_kind
class RepairEvidence(JobKind):
    name = repairs.EVIDENCE_KIND
    label = "Repair evidence"
    description = (
        "Captures a repair's evidence before any reboot: nvidia-bug-report.sh and the kernel log's fault lines."
    )
    parameters = EvidenceParameters
    transports = ("ssh", "sim")
    rerun_on_worker_loss = True  # read-only commands; the packet is written once the shard is over
    started_through = "a repair's Capture evidence (/remediation/repairs/)"

    def __init__(self):
        self.read: dict[str, dict] = {}  # step -> what it read, filled by cell_record

    def steps(self, parameters: dict) -> list[StepSpec]:
        return [
            StepSpec(name="bug-report", command="nvidia-bug-report", label="nvidia-bug-report", stop_on_failure=False),
            StepSpec(name="kernel-log", command="dmesg", label="kernel log"),
        ]

    def cell_record(self, target, step, result):
        text = (result.stdout or b"").decode("utf-8", errors="replace")
        if step.name == "bug-report":
            if result.exit_code == NOT_INSTALLED:
                self.read[step.name] = {"present": False, "note": "nvidia-bug-report.sh is not installed on the node."}
                return CellRecord(StepStatus.SUCCEEDED, "nvidia-bug-report.sh not installed: no bug report")
            if result.ok:
                self.read[step.name] = {"present": True, "file": f"{BUG_REPORT_FILE}.gz", "output": text[-OUTPUT_KEPT:]}
                return CellRecord(StepStatus.SUCCEEDED, f"bug report written to {BUG_REPORT_FILE}.gz on the node")
            self.read[step.name] = {"present": True, "note": default_summary(step, result)}
            return CellRecord(default_status(result), default_summary(step, result))
        if not result.ok:
            self.read[step.name] = {"read": False, "note": default_summary(step, result)}
            return CellRecord(default_status(result), default_summary(step, result))
        lines = [line for line in text.splitlines() if FAULT_LINE.search(line)]
        self.read[step.name] = {"read": True, "lines": lines[-KERNEL_LINES_KEPT:], "matched": len(lines)}
        return CellRecord(StepStatus.SUCCEEDED, f"{counted(len(lines), 'Xid/NVRM/AER line')} kept")

    def shard_finished(self, job, shard):
        repair = Repair.objects.filter(public_id=job.parameters["repair"]).first()
        if repair is None:
            return
        bug_report = self.read.get("bug-report", {"present": False, "note": "Not run."})
        kernel_log = self.read.get("kernel-log", {"read": False, "note": "Not run."})
        if repairs.record_evidence(repair=repair, bug_report=bug_report, kernel_log=kernel_log, job=job) is None:
            emit(job, f"No evidence packet: the kernel log could not be read ({kernel_log.get('note', '')}).")
        else:
            emit(job, f"Evidence packet recorded on the repair of {repair.node.hostname}.")
