"""The NVLink domains of rack-scale systems as the topology rules see them: each domain's compute trays with their
GPUs, its switch trays and partitions (from the inventory), and the links measured down or degraded (from the health
events, which sit above topology: apps/health fills the `measured` hook from its AppConfig.ready(), the same pattern
as apps/inventory/sections.py).

The inventory holds no row per NVLink link: every GPU of a domain has `links_per_switch_tray` links to each of its
system's switch trays (RACK_SYSTEMS). A link is missing where its GPU or its switch tray is not inventoried, or where a
measurement says it is down."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from django.db.models import Count, Max

from apps.inventory.models import Node, NvlinkDomain, NvlinkPartition, NvlinkSwitchTray


@dataclass(frozen=True)
class LinkFault:
    """Links of a compute tray measured down or degraded: on one GPU (or every GPU of the tray, `gpu_index` None),
    towards one switch tray (or unknown: None), `links_down` of them where the measurement counted. A fault on a
    switch tray itself names its `domain` and `switch_slot` (`hostname` is the switch tray's name): every GPU of the
    domain has lost its links to it."""

    hostname: str
    gpu_index: int | None
    switch_slot: int | None
    links_down: int | None
    kind: str
    summary: str
    domain: str | None = None


@dataclass
class DomainInfo:
    """One NVLink domain against its system: what is inventoried and what was measured down."""

    name: str
    system: str
    compute_trays: int
    gpus_per_tray: int
    switch_trays: int
    links_per_gpu: int
    trays: dict[int, str] = field(default_factory=dict)  # slot -> hostname
    tray_gpus: dict[str, list[int]] = field(default_factory=dict)  # hostname -> GPU indexes inventoried
    switches: dict[int, str] = field(default_factory=dict)  # slot -> switch tray name
    partitions: dict[str, list[tuple[str, str]]] = field(default_factory=dict)  # name -> [(hostname, its domain)]
    faults: list[LinkFault] = field(default_factory=list)

    @property
    def links_per_switch_tray(self) -> int:
        return self.links_per_gpu // self.switch_trays


MeasuredFaults = Callable[[], list[LinkFault]]
_MEASURED: list[MeasuredFaults] = []


def register_measured(source: MeasuredFaults) -> None:
    """Adds a source of measured link faults (apps/health's open NVLink events)."""
    if source not in _MEASURED:
        _MEASURED.append(source)


def measured_faults() -> list[LinkFault]:
    """Every registered source's faults, in a stable order (they are part of the topology's fingerprint)."""
    faults = [fault for source in _MEASURED for fault in source()]
    return sorted(faults, key=lambda f: (f.hostname, f.gpu_index is not None, f.gpu_index or 0, f.kind, f.summary))


def build_domains(gpus_by_host: dict[str, list[int]]) -> list[DomainInfo]:
    """Every NVLink domain with its trays, switch trays, partitions and measured faults (four queries and the
    sources')."""
    domains: dict[int, DomainInfo] = {}
    for domain in NvlinkDomain.objects.order_by("name"):
        spec = domain.spec
        domains[domain.pk] = DomainInfo(
            name=domain.name,
            system=spec.name,
            compute_trays=spec.compute_trays,
            gpus_per_tray=spec.gpus_per_tray,
            switch_trays=spec.switch_trays,
            links_per_gpu=spec.links_per_gpu,
        )
    if not domains:
        return []
    host_domain: dict[str, int] = {}
    for hostname, domain_id, slot in Node.objects.filter(nvlink_domain__isnull=False).values_list(
        "hostname", "nvlink_domain_id", "tray_slot"
    ):
        host_domain[hostname] = domain_id
        domains[domain_id].trays[slot] = hostname
        domains[domain_id].tray_gpus[hostname] = sorted(gpus_by_host.get(hostname, []))
    for domain_id, slot, name in NvlinkSwitchTray.objects.values_list("domain_id", "slot", "name"):
        domains[domain_id].switches[slot] = name
    members = NvlinkPartition.nodes.through.objects.values_list(
        "nvlinkpartition__domain_id", "nvlinkpartition__name", "node__hostname", "node__nvlink_domain__name"
    ).order_by("nvlinkpartition__name", "node__hostname")
    for domain_id, partition, hostname, tray_domain in members:
        domains[domain_id].partitions.setdefault(partition, []).append((hostname, tray_domain or ""))
    for partition_domain, partition in NvlinkPartition.objects.values_list("domain_id", "name"):
        domains[partition_domain].partitions.setdefault(partition, [])
    by_name = {domain.name: domain for domain in domains.values()}
    for fault in measured_faults():
        if fault.domain is not None:
            if fault.domain in by_name:
                by_name[fault.domain].faults.append(fault)
        elif fault.hostname in host_domain:
            domains[host_domain[fault.hostname]].faults.append(fault)
    return list(domains.values())


def nvlink_figures() -> list[tuple]:
    """What moves when a domain, switch tray or partition (or a partition's trays) changes, or a link fault is measured
    or cleared: the topology's fingerprint holds it (the minute's run then records the new outcome)."""
    figures = []
    for model in (NvlinkDomain, NvlinkSwitchTray, NvlinkPartition):
        row = model.objects.aggregate(count=Count("pk"), last=Max("pk"), updated=Max("updated"))
        figures.append((model._meta.label_lower, row["count"], row["last"], row["updated"]))
    members = NvlinkPartition.nodes.through.objects.aggregate(count=Count("pk"), last=Max("pk"))
    figures.append(("partition-trays", members["count"], members["last"]))
    figures.append(("measured", tuple(measured_faults())))
    return figures
