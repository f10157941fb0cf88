"""Runbooks are producers: evidence that shows a fault on a node's part is a health event on that NIC or GPU,
linked to the incident and the job and citing the lines; symptoms of the job and a rehearsal's findings make none."""

import pytest

from apps.diagnosis.choices import EvidenceVerdict
from apps.diagnosis.models import Incident
from apps.diagnosis.recording import record_observations
from apps.diagnosis.runbook import Observation
from apps.health.choices import ComponentType, Severity, Source
from apps.health.models import HealthEvent
from apps.inventory.demo import ClusterShape, load_cluster
from apps.inventory.models import Gpu, Node
from apps.jobs.models import Job

pytestmark = pytest.mark.django_db


@pytest.fixture
def node(db):
    load_cluster(ClusterShape(compute_nodes=2, nodes_per_rack=2, management_nodes=0))
    return Node.objects.get(hostname="gpu002")


def _observations(node):
    gpu = Gpu.objects.get(node=node, index=6)
    kernel_address = "PCI:" + gpu.pci_bus_id.split(".")[0]
    return gpu, [
        Observation(
            "mtu", "ens3np0", EvidenceVerdict.FAULT, "MTU 1500 (inventory: 9000)", "ip -d link show ens3np0",
            "4: ens3np0: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500", node.hostname, {"mtu": 1500},
        ),
        Observation(
            "xid", kernel_address, EvidenceVerdict.FAULT, f"Xid 79 on {kernel_address}: GPU fallen off the bus",
            "dmesg -T", f"NVRM: Xid ({kernel_address}): 79, pid=1234, GPU has fallen off the bus.", node.hostname,
            {"xids": [79]},
        ),
        Observation("watchdog", "ranks 0-7", EvidenceVerdict.FAULT, "8 ranks timed out", "tail", "", node.hostname),
        Observation("pfc", "ens1np0", EvidenceVerdict.HEALTHY, "PFC on priority 3", "mlnx_qos", "", node.hostname),
    ]  # fmt: skip


def test_a_runbook_fault_on_a_nic_or_gpu_is_an_event_there_linked_to_its_incident(node):
    incident = Incident.objects.create(title="NCCL timeout", node=node)
    job = Job.objects.create(kind="nccl-timeout", transport="sim")
    gpu, observations = _observations(node)

    record_observations(incident=incident, job=job, observations=observations, artifacts={})

    events = {event.kind: event for event in HealthEvent.objects.all()}
    assert set(events) == {"mtu_mismatch", "xid79"}
    mtu = events["mtu_mismatch"]
    assert (mtu.component_type, mtu.nic.name, mtu.source, mtu.severity) == (
        ComponentType.NIC, "ens3np0", Source.RUNBOOK, Severity.MAJOR,
    )  # fmt: skip
    assert mtu.evidence[0]["incident"] == str(incident.public_id) and mtu.evidence[0]["job"] == str(job.public_id)
    assert mtu.evidence[0]["lines"] == ["4: ens3np0: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500"]
    xid = events["xid79"]
    assert (xid.gpu, xid.severity) == (gpu, Severity.CRITICAL)


def test_a_rehearsal_records_no_event(node):
    incident = Incident.objects.create(title="rehearsal", node=node, rehearsal=True)
    job = Job.objects.create(kind="nccl-timeout", transport="sim")

    record_observations(incident=incident, job=job, observations=_observations(node)[1], artifacts={})

    assert not HealthEvent.objects.exists()
