"""What the `nccl-tests` kind needs from the app (it imports this module, never services): the links of a launcher
as the inventory holds them, and recording a shard's tests with their verdicts (reference, baseline, fleet)."""

import logging

from django.db import transaction
from django.db.models import Count

from apps.benchmarks import judging, suites
from apps.benchmarks.choices import BAD_VERDICTS, HPL_SUITES, ROBUST_Z_OUTLIER, Purpose, Scope, Verdict
from apps.benchmarks.models import (
    Baseline,
    BenchmarkTest,
    Measurement,
    MeasurementBaseline,
    MeasurementReference,
    Reference,
    Round,
)
from apps.benchmarks.references import MNNVL, NVLINK, Tiers, fabric_of, hpl_tiers
from apps.inventory.choices import NicPurpose, NicTransport
from apps.inventory.models import Nic, Node
from apps.parsers.errors import ParseError
from apps.parsers.nccl_tests import parse_nccl_tests
from apps.parsers.network import parse_ethtool, parse_ip_link, parse_mlnx_qos

logger = logging.getLogger(__name__)


def hosts_key(hosts) -> str:
    return ",".join(sorted(hosts))


def rdma_nics(node: Node) -> list[Nic]:
    """A node's RDMA data NICs in the order mlx5 numbers them (by name here, as the inventory lists them)."""
    nics = sorted(node.nics.all(), key=lambda nic: nic.name)
    return [
        nic
        for nic in nics
        if nic.purpose == NicPurpose.DATA
        and nic.rdma_capable
        and nic.transport in (NicTransport.ROCE, NicTransport.INFINIBAND)
    ]


def data_links(hostnames: list[str]) -> dict[str, list[dict]]:
    """host -> its RDMA data NICs: name, RDMA device, and speed, MTU and PFC as the inventory has them."""
    nodes = Node.objects.filter(hostname__in=hostnames).prefetch_related("nics")
    return {
        node.hostname: [
            {
                "nic": nic.name,
                "device": f"mlx5_{index}",
                "speed_gbps": nic.speed_gbps,
                "mtu": nic.mtu,
                "pfc": sorted(nic.pfc_priorities or []),
            }
            for index, nic in enumerate(rdma_nics(node))
        ]
        for node in nodes
    }


def nic_findings(reading: dict, links: list[dict]) -> list[dict]:
    """Per data NIC of a launcher: its rail alone, and where its link differs from the inventory (rate, MTU, PFC)."""
    rails = reading.get("rails") or {}
    slow = set(judging.slow_rails(rails))
    try:
        mtus = {link.name: link.mtu for link in parse_ip_link(reading.get("ip_link") or "").links}
    except ParseError:
        mtus = {}
    findings = []
    for link in links:
        problems = []
        if link["device"] in slow:
            problems.append(
                f"rail {link['device']} at {rails.get(link['device'])} GB/s, below 90 % of the node's median"
            )
        speed = _ethtool_speed(reading.get("ethtool", {}).get(link["nic"], ""))
        if speed is not None and speed < link["speed_gbps"]:
            problems.append(f"link at {speed:g} Gb/s (inventory: {link['speed_gbps']} Gb/s)")
        mtu = mtus.get(link["nic"])
        if mtu is not None and mtu < link["mtu"]:
            problems.append(f"MTU {mtu} (inventory: {link['mtu']})")
        enabled = _pfc_enabled(reading.get("mlnx_qos", {}).get(link["nic"], ""))
        missing = [priority for priority in link["pfc"] if enabled is not None and priority not in enabled]
        if missing:
            problems.append(f"PFC off on priority {', '.join(str(p) for p in missing)} (inventory: on)")
        findings.append(
            {
                "nic": link["nic"],
                "device": link["device"],
                "rail_busbw_gb_per_s": rails.get(link["device"]),
                "slow_rail": link["device"] in slow,
                "link_gbps": speed,  # the rate the NIC reports (ethtool), None where unread
                "planned_gbps": link["speed_gbps"],
                "problems": problems,
            }
        )
    return findings


def _ethtool_speed(text: str) -> float | None:
    if not text:
        return None
    try:
        settings = parse_ethtool(text)
    except ParseError:
        return None
    mbps = settings.speed_mbps
    return mbps / 1000 if mbps else None


def _pfc_enabled(text: str) -> list[int] | None:
    if not text:
        return None
    try:
        qos = parse_mlnx_qos(text)
    except ParseError:
        return None
    return qos.pfc_priorities


def _reference(node: Node | None, *, intra: bool, collective: str, hosts: list[str]) -> Reference | None:
    if node is None or node.gpu_sku_id is None:
        return None
    fabric = NVLINK if intra else (MNNVL if _one_nvlink_domain(node, hosts) else fabric_of(node))
    scope = Scope.INTRA if intra else Scope.INTER
    return Reference.objects.filter(
        sku_name=node.gpu_sku.name, fabric=fabric, scope=scope, collective=collective
    ).first()


def _one_nvlink_domain(node: Node, hosts: list[str]) -> bool:
    """Whether a test's hosts are all trays of the launcher's NVLink domain: NCCL runs over NVLink then (MNNVL)."""
    if not node.nvlink_domain_id:
        return False
    domains = set(Node.objects.filter(hostname__in=hosts).values_list("nvlink_domain_id", flat=True))
    return domains == {node.nvlink_domain_id}


def record_shard(*, job, shard, step: str, readings: dict, links: dict) -> None:
    """One BenchmarkTest per cell of the shard (could-not-run when it gave no figure), then the job's fleet z-scores."""
    parameters = job.parameters
    tests = {test["hosts"][0]: test for test in parameters.get("tests") or []}
    round_ = Round.objects.filter(job=job).select_related("run").first()
    cells = list(shard.steps.filter(step=step).select_related("node"))
    nodes = {
        node.hostname: node
        for node in Node.objects.filter(hostname__in=[cell.hostname for cell in cells])
        .select_related("gpu_sku")
        .prefetch_related("nics")
    }
    with transaction.atomic():
        for cell in cells:
            test = tests.get(cell.hostname) or {"hosts": [cell.hostname], "purpose": Purpose.RUN}
            reading = readings.get((cell.hostname, step))
            _record_test(job, round_, cell, test, reading, links.get(cell.hostname, []), nodes.get(cell.hostname))
        _fleet_scores(job)


def _record_test(job, round_, cell, test, reading, links, node) -> BenchmarkTest:
    parameters = job.parameters
    hosts = list(test["hosts"])
    intra = len(hosts) == 1
    collective = parameters["collective"]
    reference = _reference(node, intra=intra, collective=collective, hosts=hosts)
    parsed, errors = None, []
    if reading and reading.get("stdout", "").strip():
        try:
            parsed = parse_nccl_tests(reading["stdout"])
            errors = list(parsed.errors)
        except ParseError as error:
            errors = [f"output not understood: {error}"]
    elif reading is None:
        errors = [cell.summary or f"the cell ended {cell.status} before nccl-tests ran"]
    else:
        errors = [reading.get("error") or (reading.get("stderr") or "").strip()[-300:] or "no output"]
    size, busbw = judging.figure(parsed) if parsed else (None, None)
    verdict = reference.judge(busbw) if reference else (Verdict.COULD_NOT_RUN if busbw is None else Verdict.PASS)
    key = hosts_key(hosts)
    baseline = Baseline.objects.filter(collective=collective, hosts_key=key).first()
    evidence = {
        "command": (reading or {}).get("command", []),
        "exit_code": (reading or {}).get("exit_code"),
        "errors": errors[:10],
        "criterion": (
            f"out-of-place busbw at the largest size ≥ {reference.warn_gb_per_s:g} GB/s to pass, "
            f"≥ {reference.fail_gb_per_s:g} to warn "
            f"(expected {reference.expected_gb_per_s:g}; {reference.sku_name}, {reference.fabric})"
            if reference
            else "no reference for this SKU and fabric: a figure passes, no figure could not run"
        ),
        "reference_source": reference.source if reference else "",
        "artifact_step": cell.pk,
    }
    findings = nic_findings(reading, links) if reading and reading.get("rails") is not None else []
    values = {
        "run": round_.run if round_ else None,
        "round": round_,
        "hosts": hosts,
        "hosts_key": key,
        "purpose": test.get("purpose") or Purpose.RUN,
        "subject": test.get("subject") or "",
        "partner": test.get("partner") or "",
        "collective": collective,
        "size_bytes": size,
        "busbw_gb_per_s": busbw,
        "avg_busbw_gb_per_s": parsed.avg_busbw_gb_per_s if parsed else None,
        "series": judging.series(parsed) if parsed else [],
        "rails": (reading or {}).get("rails") or {},
        "nic_findings": findings,
        "reference": reference,
        "expected_gb_per_s": reference.expected_gb_per_s if reference else None,
        "warn_gb_per_s": reference.warn_gb_per_s if reference else None,
        "fail_gb_per_s": reference.fail_gb_per_s if reference else None,
        "baseline": baseline,
        "baseline_gb_per_s": baseline.busbw_gb_per_s if baseline else None,
        "verdict": verdict,
        "evidence": evidence,
    }
    result, _ = BenchmarkTest.objects.update_or_create(job=job, launcher=cell.hostname, defaults=values)
    return result


def _fleet_scores(job) -> None:
    """Each test's robust z-score among the job's tests of the same size of host set (the fleet of that round)."""
    tests = list(BenchmarkTest.objects.filter(job=job, busbw_gb_per_s__isnull=False))
    by_size: dict[int, list[BenchmarkTest]] = {}
    for test in tests:
        by_size.setdefault(len(test.hosts), []).append(test)
    for group in by_size.values():
        for test, score in zip(group, judging.robust_z([test.busbw_gb_per_s for test in group]), strict=True):
            if test.z_score != score:
                test.z_score = score
                test.save(update_fields=["z_score", "updated"])


def is_bad(test: BenchmarkTest) -> bool:
    """A test the sweep treats as bad: below a reference tier, no figure, or an outlier of its round's fleet."""
    return test.verdict in BAD_VERDICTS or (test.z_score is not None and test.z_score <= ROBUST_Z_OUTLIER)


# --- the per-node suites ------------------------------------------------------------------------------------------


def record_measurements(*, job, shard, step: str, readings: dict) -> None:
    """One Measurement per figure of each cell of the shard (could-not-run rows when a cell gave none), judged
    against the node's SKU reference and the scope's baseline, then the fleet z-scores of the job's figures."""
    parameters = job.parameters
    suite = parameters["suite"]
    tests = {test["hosts"][0]: test for test in parameters.get("tests") or []}
    round_ = Round.objects.filter(job=job).select_related("run").first()
    if round_ is None:
        return  # a node-benchmark job started outside a run has nowhere to keep its figures
    cells = list(shard.steps.filter(step=step))
    nodes = {
        node.hostname: node
        for node in Node.objects.filter(hostname__in=[cell.hostname for cell in cells])
        .select_related("gpu_sku")
        .annotate(gpu_count=Count("gpus"))
    }
    with transaction.atomic():
        for cell in cells:
            hosts = list((tests.get(cell.hostname) or {"hosts": [cell.hostname]})["hosts"])
            node = nodes.get(cell.hostname)
            reading = readings.get((cell.hostname, step))
            figures = _cell_figures(
                suite,
                cell,
                reading,
                gpus_expected=node.gpu_count if node else 0,
                burn_load=parameters.get("burn_load", "gpu-burn"),
            )
            for figure in figures:
                _record_measurement(job, round_, cell, hosts, node, suite, figure, reading)
        _measurement_scores(job)


def _cell_figures(suite: str, cell, reading: dict | None, *, gpus_expected: int, burn_load: str) -> list[suites.Figure]:
    """The cell's figures; could-not-run figures naming why when the tool printed nothing it understands."""
    cases = [case for case, _unit in suites.CASES[suite]]
    if reading is None:
        why = cell.summary or f"the cell ended {cell.status} before the command ran"
    elif not reading.get("stdout", "").strip():
        why = reading.get("error") or (reading.get("stderr") or "").strip()[-300:] or "no output"
    else:
        try:
            found = suites.figures(
                suite,
                reading["stdout"],
                reading.get("stderr", ""),
                gpus_expected=gpus_expected,
                burn_load=burn_load,
            )
        except ParseError as error:
            why = f"output not understood: {error}"
        else:
            if found:
                return found
            why = "the output held no figure"
    units = dict(suites.CASES[suite])
    return [suites.Figure(case, units[case], None, notes=[why], floor=Verdict.COULD_NOT_RUN) for case in cases]


def _record_measurement(job, round_, cell, hosts, node, suite, figure: suites.Figure, reading) -> Measurement:
    sku = node.gpu_sku.name if node is not None and node.gpu_sku_id else ""
    reference = MeasurementReference.objects.filter(sku_name=sku, suite=suite, case=figure.case).first()
    tiers = _tiers(reference, suite=suite, hosts=hosts, node=node, series=figure.series) if reference else None
    verdict = tiers.judge(figure.value) if tiers else (Verdict.COULD_NOT_RUN if figure.value is None else Verdict.PASS)
    verdict = judging.worse(verdict, figure.floor) if figure.value is not None else Verdict.COULD_NOT_RUN
    key = hosts_key(hosts)
    baseline = MeasurementBaseline.objects.filter(suite=suite, case=figure.case, hosts_key=key).first()
    criterion = (
        f"{figure.case} ≥ {tiers.warn_below:g} {reference.unit} to pass, ≥ {tiers.fail_below:g} to warn "
        f"(expected {tiers.expected:g}; {reference.sku_name}{'; ' + tiers.note if tiers.note else ''})"
        if reference
        else f"no reference for {sku or 'this SKU'}: a figure passes, no figure could not run"
    )
    evidence = {
        "command": (reading or {}).get("command", []),
        "exit_code": (reading or {}).get("exit_code"),
        "notes": figure.notes[:10],
        "criterion": criterion,
        "reference_source": reference.source if reference else "",
        "artifact_step": cell.pk,
    }
    values = {
        "run": round_.run,
        "round": round_,
        "hosts": hosts,
        "hosts_key": key,
        "sku_name": sku,
        "suite": suite,
        "unit": figure.unit,
        "value": None if figure.value is None else round(figure.value, 3),
        "series": figure.series,
        "reference": reference,
        "expected": round(tiers.expected, 3) if tiers else None,
        "warn_below": round(tiers.warn_below, 3) if tiers else None,
        "fail_below": round(tiers.fail_below, 3) if tiers else None,
        "baseline": baseline,
        "baseline_value": baseline.value if baseline else None,
        "verdict": verdict,
        "evidence": evidence,
    }
    measurement, _ = Measurement.objects.update_or_create(
        job=job, launcher=cell.hostname, case=figure.case, defaults=values
    )
    return measurement


def _tiers(reference, *, suite: str, hosts: list[str], node, series: dict) -> Tiers:
    """The tiers a figure is held to: the reference's own, but for an HPL solve across nodes, whose reference comes
    from the multi-node model (references.hpl_tiers) rather than one node's figure."""
    if suite not in HPL_SUITES or len(hosts) < 2:
        return Tiers(reference.expected, reference.warn_below, reference.fail_below)
    nodes = list(Node.objects.filter(hostname__in=hosts).prefetch_related("nics"))
    ranks = (series.get("nprow") or series.get("p") or 0) * (series.get("npcol") or series.get("q") or 0)
    gpus = ranks or (getattr(node, "gpu_count", 0) or 0) * len(hosts)
    return hpl_tiers(reference, suite=suite, nodes=nodes, n=series.get("n"), nb=series.get("nb"), gpus=gpus)


def _measurement_scores(job) -> None:
    """Each figure's robust z-score among the job's figures of the same case and host-set size."""
    groups: dict[tuple[str, int], list[Measurement]] = {}
    for measurement in Measurement.objects.filter(job=job, value__isnull=False):
        groups.setdefault((measurement.case, len(measurement.hosts)), []).append(measurement)
    for group in groups.values():
        for measurement, score in zip(group, judging.robust_z([item.value for item in group]), strict=True):
            if measurement.z_score != score:
                measurement.z_score = score
                measurement.save(update_fields=["z_score", "updated"])
