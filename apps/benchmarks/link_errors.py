"""Link errors around a bandwidth test: the NIC error counters (`ethtool -S`: CRC/FCS and symbol errors) of every
node's RDMA data NICs read before and after it; a NIC whose counters grew over the run is named with its cable and
the switch port at the cable's other end. A cable that only corrupts frames barely slows NCCL (RoCE resends the
window: 50 per million costs ~5 %), so the bandwidth figure alone passes it; its counters do not.

The thresholds are data (deployments' `nic_link_errors` criterion): errors per million frames received in the
window, at most `threshold` to pass, at most `warn_threshold` to warn, above: fail."""

from dataclasses import dataclass

from django.db.models import Prefetch

from apps.benchmarks.choices import Verdict
from apps.benchmarks.kinds import COUNTERS_STEP, ERROR_COUNTERS, FRAMES_COUNTER, NicCounters
from apps.inventory.models import Nic, Node
from apps.jobs import executor
from apps.jobs import services as job_services
from apps.jobs.models import Job
from apps.jobs.services import TargetSpec

Counters = dict[str, dict[str, dict | None]]  # host -> NIC -> counter -> value (None: the NIC could not be read)


@dataclass(frozen=True)
class Tiers:
    pass_per_million: float = 0.0  # at most this many errors per million frames received passes
    warn_per_million: float | None = 1.0  # at most this warns; None: anything above the pass tier fails


def read_counters(*, hostnames: list[str], transport: str, requested_by=None) -> tuple[Job, Counters]:
    """One `nic-counters` job over the nodes, its shards run here; the counters each NIC reported."""
    job = job_services.create_job(
        kind=NicCounters.name,
        targets=TargetSpec(nodes=tuple(hostnames)),
        parameters={},
        transport=transport,
        requested_by=requested_by,
        queue=False,
    )
    for shard in job.shards.order_by("index"):
        executor.run_shard(job_public_id=str(job.public_id), index=shard.index, worker="benchmark")
    return job, counters_of(job)


def counters_of(job: Job) -> Counters:
    events = job.events.filter(step=COUNTERS_STEP).exclude(hostname="").order_by("seq")
    return {event.hostname: event.data["nics"] for event in events if "nics" in event.data}


def cable_end(nic: Nic) -> tuple[str, str, str]:
    """The NIC's cable (its label, else its public id), and the switch and port at the cable's other end."""
    link = getattr(nic, "cable_as_a", None) or getattr(nic, "cable_as_b", None)
    if link is None:
        return "", "", ""
    far_switch, far_port = (link.b_switch, link.b_port) if link.a_nic_id == nic.pk else (link.a_switch, link.a_port)
    return link.label or str(link.public_id), far_switch.name if far_switch else "", far_port


def verdict(errors_per_million: float, tiers: Tiers) -> str:
    if errors_per_million <= tiers.pass_per_million:
        return Verdict.PASS
    if tiers.warn_per_million is not None and errors_per_million <= tiers.warn_per_million:
        return Verdict.WARN
    return Verdict.FAIL


def grown(before: Counters, after: Counters, tiers: Tiers) -> list[dict]:
    """Each NIC whose error counters grew between the readings, worst first: what grew, over how many frames, the
    rate, its verdict, and its cable and switch port from the inventory. NICs unread on either side are left out
    (see `unread`)."""
    found = []
    for hostname, nics in sorted(after.items()):
        for name, counters in sorted(nics.items()):
            earlier = (before.get(hostname) or {}).get(name)
            if counters is None or earlier is None:
                continue
            deltas = {
                counter: counters[counter] - earlier[counter]
                for counter in ERROR_COUNTERS
                if counter in counters and counter in earlier and counters[counter] > earlier[counter]
            }
            if not deltas:
                continue
            frames = max(counters.get(FRAMES_COUNTER, 0) - earlier.get(FRAMES_COUNTER, 0), 0)
            errors = max(deltas.values())
            rate = errors / frames * 1e6 if frames else float("inf")
            found.append(
                {
                    "node": hostname,
                    "nic": name,
                    "grew": deltas,
                    "frames": frames,
                    "errors_per_million": round(rate, 3) if frames else None,
                    "verdict": verdict(rate, tiers),
                }
            )
    _with_cables(found)
    order = {Verdict.FAIL: 0, Verdict.WARN: 1, Verdict.PASS: 2}
    return sorted(found, key=lambda item: (order[item["verdict"]], item["node"], item["nic"]))


def unread(before: Counters, after: Counters, hostnames: list[str]) -> list[str]:
    """`host:nic` of the NICs whose counters could not be read on either side of the test, and `host` of the nodes
    that gave no reading at all (unreachable)."""
    names = {hostname for hostname in hostnames if hostname not in before or hostname not in after}
    for readings in (before, after):
        for hostname, nics in readings.items():
            names.update(f"{hostname}:{name}" for name, counters in nics.items() if counters is None)
    return sorted(names)


def _with_cables(found: list[dict]) -> None:
    nics = Nic.objects.select_related("cable_as_a__b_switch", "cable_as_b__a_switch")
    nodes = Node.objects.filter(hostname__in={item["node"] for item in found}).prefetch_related(
        Prefetch("nics", queryset=nics)
    )
    by_name = {(node.hostname, nic.name): nic for node in nodes for nic in node.nics.all()}
    for item in found:
        nic = by_name.get((item["node"], item["nic"]))
        item["cable"], item["switch"], item["switch_port"] = cable_end(nic) if nic else ("", "", "")
