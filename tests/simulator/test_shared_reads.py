"""What the simulator reads once for many nodes, so that a sweep over thousands of nodes stays affordable: a launcher
reads the nodes it reaches together, and the sessions of one fan-out share their leaves' fabric figures. Each answers
what reading the nodes one by one answers."""

import asyncio

from django.db import connection
from django.test.utils import CaptureQueriesContext

from apps.inventory.models import Node
from apps.nodeexec.base import NodeTarget
from apps.nodeexec.sim import SimTransport, get_simulator, register_simulator
from apps.simulator import services
from apps.simulator.backend import SimulatorBackend
from tests.simulator.test_mpirun import mpirun

HOSTS = [f"gpu{number:03d}" for number in range(1, 17)]  # two racks: four leaves, both planes


def test_states_read_together_are_those_read_one_by_one(demo_cluster):
    services.inject_fault(
        node=Node.objects.get(hostname="gpu003"), kind="degraded_cable", target="ens3np0", parameters={"rate_gbps": 200}
    )
    services.run_command(node=Node.objects.get(hostname="gpu004"), argv=["ip", "link", "set", "ens1np0", "mtu", "4200"])

    together = services.node_states(hostnames=[*HOSTS, "ghost"])

    assert together == {host: services.node_state(node=Node.objects.get(hostname=host)) for host in HOSTS}
    assert together["gpu003"].nic("ens3np0").cable_speed_gbps == 200 and together["gpu004"].nic("ens1np0").mtu == 4200


def queries_of(work) -> int:
    with CaptureQueriesContext(connection) as queries:
        work()
    return len(queries)


def test_a_launcher_reads_and_writes_the_nodes_it_reaches_together(demo_cluster):
    """mpirun across 16 nodes asks the database no more than across 2 (reading their states, storing the traffic
    it counted on their NICs), and counts that traffic on every one of them."""
    two = queries_of(lambda: mpirun(HOSTS[:2], sizes=("-b", "1G", "-e", "1G")))
    sixteen = queries_of(lambda: mpirun(HOSTS, sizes=("-b", "1G", "-e", "1G")))

    assert sixteen == two
    counted = Node.objects.filter(hostname__in=HOSTS, sim_changes__key="nic:ens1np0:traffic").count()
    assert counted == len(HOSTS)


def test_the_sessions_of_a_fan_out_read_each_leaf_once_and_answer_alike(demo_cluster):
    backend = SimulatorBackend()
    shared = backend.shared_reads()
    argv = ["ethtool", "-S", "ens3np0"]
    first = backend.session(Node.objects.get(hostname="gpu001"), shared)
    first.run(argv)
    answers = {}

    def sharing():
        answers["shared"] = backend.session(Node.objects.get(hostname="gpu002"), shared).run(argv)

    def alone():
        answers["alone"] = backend.session(Node.objects.get(hostname="gpu002")).run(argv)

    assert queries_of(sharing) < queries_of(alone)  # gpu002 sits behind gpu001's leaves: read already
    assert answers["shared"] == answers["alone"]


def test_the_nodes_of_a_fan_out_are_read_together_and_still_see_a_fault_injected_since(demo_cluster):
    """Sessions opened together are read in one batch when the first needs its state; a node whose fault came after
    that batch is read afresh, and every answer is what a session of its own answers."""
    backend = SimulatorBackend()
    shared = backend.shared_reads()
    argv = ["ethtool", "ens3np0"]
    sessions = {host: backend.session(Node.objects.get(hostname=host), shared) for host in HOSTS[:8]}
    first = queries_of(lambda: sessions["gpu001"].run(argv))
    services.inject_fault(
        node=Node.objects.get(hostname="gpu005"), kind="degraded_cable", target="ens3np0", parameters={"rate_gbps": 200}
    )
    answers, later = {}, {}
    for host, session in sessions.items():
        with CaptureQueriesContext(connection) as queries:
            answers[host] = session.run(argv)
        later[host] = len(queries)

    alone = {host: backend.session(Node.objects.get(hostname=host)).run(argv) for host in HOSTS[:8]}
    assert answers == alone and "Speed: 200000Mb/s" in answers["gpu005"][1]
    assert max(later[host] for host in HOSTS[1:8] if host != "gpu005") < first / 2  # read in gpu001's batch
    assert later["gpu005"] > later["gpu002"]  # its fault moved: read again


class Recording:
    """A backend that records what each session was handed."""

    def __init__(self):
        self.handed = []

    def run(self, node, argv):
        return 0, "", ""

    def shared_reads(self):
        return object()

    def session(self, node, shared=None):
        self.handed.append(shared)
        return self


def test_the_sim_transport_hands_one_shared_read_to_the_sessions_of_its_fan_out():
    recording, installed = Recording(), get_simulator()
    register_simulator(recording)
    try:

        async def open_two(transport):
            for name in ("a", "b"):
                await transport.open(NodeTarget(hostname=name, address="10.0.0.1"))

        asyncio.run(open_two(SimTransport()))
        asyncio.run(open_two(SimTransport()))
    finally:
        register_simulator(installed)
    first, second = recording.handed[:2], recording.handed[2:]
    assert first[0] is first[1] and second[0] is second[1]  # one per fan-out, the same for its sessions
    assert first[0] is not second[0] and first[0] is not None
