"""apps/monitoring/kinds/kernel_log.py: `kernel-log` reads every compute node's kernel log (its warnings and errors,
`dmesg --time-format iso`) and turns the Xid and PCIe AER lines logged since the last read into health events
(apps/monitoring/kernel_log.py); a node whose connection times out is recorded `node_unreachable`, cleared when a
later read reaches it (apps/monitoring/reachability.py). Started every 5 minutes over the fleet, one job for all nodes
(its shards and the transport's concurrency window share them out), or by hand."""

from apps.core.text import counted
from apps.jobs.choices import EventLevel
from apps.jobs.events import emit
from apps.jobs.kinds import CellRecord, JobKind, StepSpec, default_status, default_summary, register_kind
from apps.monitoring import kernel_log, reachability
from apps.nodeexec.base import CommandResult, NodeTarget

STEP = "dmesg"


@register_kind
class KernelLogRead(JobKind):
    name = kernel_log.KIND
    label = "Kernel log"
    description = (
        "Reads each node's kernel log (dmesg's warnings and errors) and records the Xid and PCIe AER lines logged "
        "since the last read as health events."
    )
    rerun_on_worker_loss = True  # a read; the high-water mark keeps lines from being counted twice
    private_output = True  # the whole log is kept for operators; every role sees the events
    transports = ("ssh", "sim")  # the node's own kernel log, read on it (never the worker's host)

    def __init__(self):
        self.logs: dict[str, str] = {}  # hostname -> the log read, filled by cell_record
        self.silent: dict[str, str] = {}  # hostname -> the error line of a connection that timed out
        self.answered: set[str] = set()  # the hostnames the read reached (whatever dmesg's exit status)

    def steps(self, parameters: dict) -> list[StepSpec]:
        return [StepSpec(STEP, kernel_log.COMMAND.name, "Kernel log", stop_on_failure=False)]

    def cell_record(self, target: NodeTarget, step: StepSpec, result: CommandResult) -> CellRecord:
        if (line := reachability.timed_out_line(result)) is not None:
            self.silent[target.hostname] = line
        elif reachability.reached(result):
            self.answered.add(target.hostname)
        if not result.ok:
            return CellRecord(default_status(result), default_summary(step, result))
        text = result.stdout.decode("utf-8", "replace")
        self.logs[target.hostname] = text
        return CellRecord(default_status(result), counted(sum(1 for line in text.splitlines() if line.strip()), "line"))

    def shard_finished(self, job, shard) -> None:
        if self.silent or self.answered:
            reachability.record_reachability(
                nodes=job.nodes.filter(hostname__in=list(self.silent)).in_bulk(field_name="hostname"),
                silent=self.silent,
                answered=self.answered,
                job=job,
                command=" ".join(kernel_log.COMMAND.argv),
            )
        nodes = (
            job.nodes.filter(hostname__in=list(self.logs))
            .prefetch_related("gpus", "nics")
            .in_bulk(field_name="hostname")
        )
        for hostname, text in sorted(self.logs.items()):
            node = nodes.get(hostname)
            if node is None:  # deleted since the job started
                continue
            events = kernel_log.record_kernel_log(node=node, text=text, job=job)
            if events:
                kinds = ", ".join(sorted({event.kind for event in events}))
                emit(
                    job, f"{counted(len(events), 'health event')}: {kinds}", level=EventLevel.WARNING, hostname=hostname
                )
