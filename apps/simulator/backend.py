"""The adapter the jobs engine's `sim` transport calls: run(node, argv) -> (exit_code, stdout, stderr).

Registered from SimulatorConfig.ready() with apps.nodeexec.sim.register_simulator; call `register()` again (or
`register(SimulatorBackend(seed=..., load=...))`) to install one with other settings, e.g. in a test.
"""

from django.conf import settings

from apps.core.threads import thread_connection_returned
from apps.inventory.models import Node
from apps.simulator import services


class SimulatorBackend:
    """Answers a command for a simulated node. `node` is a Node, or anything with node_id or hostname (a NodeTarget)."""

    def __init__(self, *, seed: int | None = None, load: float = 0.0, real_time: bool | None = None):
        self.seed = getattr(settings, "RACKPILOT_SIM_SEED", 0) if seed is None else seed
        self.load = load
        self.real_time = getattr(settings, "RACKPILOT_SIM_REAL_TIME", False) if real_time is None else real_time

    def run(self, node, argv: list[str]) -> tuple[int, str, str, float]:
        """One command on its own: the node's state is read for it."""
        return self.session(node).run(argv)

    def session(self, node, shared: services.FanOutReads | None = None) -> "BackendSession":
        """A connection's worth of commands: the node and its state are read once (see services.NodeSession);
        `shared`: what the sessions of one fan-out read together (from shared_reads())."""
        return BackendSession(self, node, shared)

    def shared_reads(self) -> services.FanOutReads:
        """What the sim transport's sessions of one fan-out read together: their nodes' states, their leaves."""
        return services.FanOutReads()


class BackendSession:
    def __init__(self, backend: SimulatorBackend, node, shared: services.FanOutReads | None = None):
        self.backend, self.node, self.shared = backend, node, shared
        self._session: services.NodeSession | None = None
        hostname = getattr(node, "hostname", node)
        if shared is not None and isinstance(hostname, str):
            shared.opened(hostname)  # read with the others opened by then, when the first of them needs its state

    def run(self, argv: list[str]) -> tuple[int, str, str, float]:
        with thread_connection_returned():  # the sim transport calls this from a fan-out's worker threads
            if self._session is None:
                inventory_node = _resolve(self.node)
                if inventory_node is None:
                    name = getattr(self.node, "hostname", self.node)
                    return 255, "", f"ssh: Could not resolve hostname {name}: Name or service not known\n", 0.0
                self._session = services.NodeSession(
                    inventory_node,
                    seed=self.backend.seed,
                    load=self.backend.load,
                    real_time=self.backend.real_time,
                    shared=self.shared,
                )
            return self._session.run(list(argv)).as_answer()


def _resolve(node) -> Node | None:
    if isinstance(node, Node):
        return node
    node_id = getattr(node, "node_id", None)
    if node_id is not None:
        return Node.objects.filter(pk=node_id).first()
    hostname = getattr(node, "hostname", node if isinstance(node, str) else None)
    return Node.objects.filter(hostname=hostname).first() if hostname else None


def register(backend: SimulatorBackend | None = None) -> SimulatorBackend:
    """Install the simulator behind the `sim` transport (the jobs engine's nodeexec registry)."""
    backend = backend or SimulatorBackend()
    try:
        from apps.nodeexec.sim import register_simulated_bmc, register_simulator
    except ImportError:  # the transports are not installed: the simulator still works through its services
        return backend
    from apps.nodeexec.sim_telemetry import register_telemetry_source
    from apps.simulator import bmc

    register_simulator(backend)
    register_simulated_bmc(bmc)  # the module answers the BMC reads' sim transport (monitoring's bmc-poll kind)
    register_telemetry_source(_telemetry_model)  # the embedded wiring's telemetry (apps.monitoring) reads the model
    return backend


def _telemetry_model(*, workloads, seed: int = 0, hostnames: list[str] | None = None):
    """The telemetry source apps.nodeexec.sim_telemetry hands the embedded wiring (looked up at each call, so that a
    test may stand in for services.telemetry_model)."""
    return services.telemetry_model(workloads=workloads, seed=seed, hostnames=hostnames)
