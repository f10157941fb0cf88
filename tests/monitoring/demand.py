"""The simulated services' background demand is a daily wave whose phase comes from the seed: a test whose outcome
depends on how much of a service's capacity the background takes picks its seed by the hour it runs at."""

import time

from apps.simulator.telemetry import ClusterTelemetry, ServingRun, Workloads


def seed_where_demand_is(where: str, service_name: str) -> int:
    """A simulator seed (of 32) whose demand wave is now nearest its "peak" (70 % of design) or "trough" (30 %) for
    the service, so that the test does not depend on the hour it runs at."""
    run, now = ServingRun(service_name, "", (), 1000.0, 0.0), time.time()
    demand = {seed: ClusterTelemetry([], Workloads(), seed=seed).demand(run, now) for seed in range(32)}
    return (max if where == "peak" else min)(demand, key=demand.get)
