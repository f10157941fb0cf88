"""A sweep's suspects in a rack-scale NVLink domain, named by their tray: a compute tray is the unit to isolate (its
GPUs, NICs and NVLink connectors come out together), so each such suspect says its tray, its slot and its domain.
Where every tray of a domain the sweep tested is a suspect or left unresolved, what they share is the domain's
NVLink switch trays: the suspects say to look there first (a switch tray down costs every GPU its links to it)."""

from collections import defaultdict

from apps.benchmarks.models import BenchmarkRun, Suspect


def name_trays(run: BenchmarkRun) -> int:
    """Adds the tray to each of the run's suspects that is a compute tray; returns how many were named."""
    suspects = [s for s in run.suspects.select_related("node__nvlink_domain") if s.node.nvlink_domain_id]
    if not suspects:
        return 0
    unresolved = set(run.parameters.get("unresolved") or [])
    by_domain: dict[int, list[Suspect]] = defaultdict(list)
    for suspect in suspects:
        by_domain[suspect.node.nvlink_domain_id].append(suspect)
    for domain_id, group in by_domain.items():
        domain = group[0].node.nvlink_domain
        tested = set(run.nodes.filter(nvlink_domain_id=domain_id).values_list("hostname", flat=True))
        bad = {suspect.node.hostname for suspect in group} | (unresolved & tested)
        shared = len(tested) >= 2 and bad >= tested
        switch_trays = list(domain.switch_trays.order_by("slot").values_list("name", flat=True)) if shared else []
        for suspect in group:
            node = suspect.node
            where = f"compute tray {node.hostname} (slot {node.tray_slot} of NVLink domain {domain.name})"
            if shared:
                where = (
                    f"every tested tray of NVLink domain {domain.name} is bad: suspect its switch trays "
                    f"({', '.join(switch_trays) or 'none inventoried'}) before {node.hostname}"
                )
            suspect.evidence = {
                **suspect.evidence,
                "tray": {
                    "domain": domain.name,
                    "compute_tray": node.hostname,
                    "slot": node.tray_slot,
                    "isolate": "switch trays" if shared else "compute tray",
                    "switch_trays": switch_trays,
                },
            }
            suspect.cause = f"{where}; {suspect.cause}"[:300]
            suspect.save(update_fields=["evidence", "cause", "updated"])
    return len(suspects)
