"""The simulated services' background demand is a daily wave whose phase comes from the seed: a test whose outcome
depends on how much of a service's capacity the background takes picks its seed for the moment its telemetry is read
at (the clock the test sets), so that it does not depend on the hour it runs at."""

from apps.nodeexec.sim_telemetry import ServingRun, Workloads
from apps.simulator.telemetry import ClusterTelemetry


def seed_where_demand_is(where: str, service_name: str, *, at: float) -> int:
    """A simulator seed (of 32) whose demand wave is at `at` (unix seconds) nearest its "peak" (70 % of design) or
    "trough" (30 %) for the service."""
    run = ServingRun(service_name, "", (), 1000.0, 0.0)
    demand = {seed: ClusterTelemetry([], Workloads(), seed=seed).demand(run, at) for seed in range(32)}
    return (max if where == "peak" else min)(demand, key=demand.get)
