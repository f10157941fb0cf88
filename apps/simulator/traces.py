"""The simulated timeline source: a training job's DDP profiler traces as its nodes would write them now (their
faults and changes included). The one seam the benchmarks' `simulated` timeline source goes through (the contract in
pyproject.toml lists it); the traces themselves are the profiler model's (profiler.py)."""

from apps.simulator.profiler import ddp_traces
from apps.simulator.services import node_state


def simulated_ddp_traces(*, nodes: list, ranks_per_node: int, steps: int, seed: int, name: str) -> dict[int, str]:
    """Each rank's trace text (rank → JSON) for `steps` profiled steps of the job on `nodes` (inventory Node rows, in
    node-rank order)."""
    states = {node.hostname: node_state(node=node) for node in nodes}
    return ddp_traces(
        hosts=[node.hostname for node in nodes],
        states=states,
        ranks_per_node=ranks_per_node,
        steps=steps,
        seed=seed,
        name=name,
    )
