"""PyTorch profiler Chrome traces of a simulated data-parallel (DDP) training job, one file per rank.

The format is the real one (`torch.profiler` `export_chrome_trace`, as in shared/fixtures/real/h200-1gpu/):
the header with `distributedInfo` (rank, world size, NCCL), `process_name`/`process_labels` metadata,
`ProfilerStep#N` user annotations on the host thread, `cudaLaunchKernel` runtime calls and the GPU's `kernel`
events linked to them by `args.correlation`.

The figures come from a model of one DDP step on each rank:

* the data loader: the GPU waits `LOADER_SHARE` of the compute time (seeded ±2 %) before the forward pass;
* seeded noise: each rank's pace per step ±0.1 %, each kernel ±0.3 %;
* forward: a third of the step's FLOPs (6 × parameters × tokens), backward two thirds, at `MFU` of the rank's
  GPU's dense bf16 rate (`model.gemm_tflops`: clocks, power cap, thermal slowdown, a straggler's capped
  clocks);
* the gradients (2 bytes per parameter) are all-reduced in `BUCKET_BYTES` buckets as backward produces them,
  on NCCL's stream: bucket i starts on a rank when its gradients are ready there and the previous bucket is done;
  it ends on every rank together, `ring_model(...).time_us(bucket)` after the last rank joined (the ring over the
  job's nodes: NIC speed, MTU, PFC, a degraded cable, the straggler). So a slow NIC stretches every bucket, and a
  straggler makes its peers' NCCL kernels wait for it: both raise the communication share;
* the optimizer step after the last bucket, then the next step.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass

from apps.simulator.model import compute_facts, gemm_tflops, ring_model
from apps.simulator.state import SimulatedNode

PARAMETERS = 1.0e9  # a 1B-parameter model, bf16 gradients
TOKENS_PER_GPU = 8192  # per step
MFU = 0.42  # the share of the GPU's dense rate a transformer step reaches
BUCKET_BYTES = 25 * 2**20  # DDP's default bucket_cap_mb
LOADER_SHARE = 0.04
OPTIMIZER_SHARE = 0.05
FORWARD_KERNELS = 12
RANK_JITTER = 0.001  # seeded: how much one rank's pace differs from another's in a step
KERNEL_JITTER = 0.003
NCCL_KERNEL = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"
GEMM_KERNEL = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64_warpgroupsize2x1x1_execute_kernel__5x_cublas"
ELEMENTWISE_KERNEL = (
    "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, std::array<char*, 1ul> >"
    "(int, at::native::FillFunctor<float>, std::array<char*, 1ul>)"
)
OPTIMIZER_KERNEL = (
    "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::"
    "TensorListMetadata<2>, at::native::(anonymous namespace)::BinaryOpListAlphaFunctor<float, 2, 2, 0>, "
    "std::plus<float>, float>(at::native::(anonymous namespace)::TensorListMetadata<2>, at::native::(anonymous "
    "namespace)::BinaryOpListAlphaFunctor<float, 2, 2, 0>, std::plus<float>, float)"
)
HOST_PID = 416
COMPUTE_STREAM, NCCL_STREAM = 7, 20
LAUNCH_US = 4.0


@dataclass
class _Rank:
    rank: int
    host: str
    local: int
    forward_us: float
    backward_us: float
    optimizer_us: float
    events: list
    correlation: int = 1000


def _compute_us(state: SimulatedNode, local: int) -> float:
    gpus = sorted(state.visible_gpus, key=lambda gpu: gpu.index)
    gpu = gpus[local % len(gpus)]
    tflops = gemm_tflops(gpu) * MFU  # a straggler's capped clocks, a power cap, thermal slowdown: all in the rate
    return 6 * PARAMETERS * TOKENS_PER_GPU / (tflops * 1e12) * 1e6


def _kernel(rank: _Rank, name: str, start: float, end: float, stream: int, launch: float) -> None:
    rank.correlation += 1
    tid = HOST_PID + 33
    rank.events.append(
        {
            "ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": HOST_PID, "tid": tid,
            "ts": round(launch, 3), "dur": LAUNCH_US, "args": {"cbid": 211, "correlation": rank.correlation},
        }
    )  # fmt: skip
    rank.events.append(
        {
            "ph": "X", "cat": "kernel", "name": name, "pid": rank.local, "tid": stream,
            "ts": round(start, 3), "dur": round(max(end - start, 0.5), 3),
            "args": {"External id": rank.correlation, "queued": 0, "device": rank.local, "context": 1,
                     "stream": stream, "correlation": rank.correlation, "registers per thread": 128,
                     "shared memory": 0, "grid": [132, 1, 1], "block": [384, 1, 1]},
        }
    )  # fmt: skip


def ddp_traces(
    *, hosts: list[str], states: dict[str, SimulatedNode], ranks_per_node: int, steps: int, seed: int, name: str
) -> dict[int, str]:
    """Each rank's trace text (rank → JSON) for `steps` profiled steps of the job on `hosts` (node-rank order)."""
    nodes = [states[host] for host in hosts]
    ring = ring_model("all_reduce", nodes, ranks_per_node)
    gradient_bytes = int(2 * PARAMETERS)
    buckets = max(1, -(-gradient_bytes // BUCKET_BYTES))
    bucket_us = ring.time_us(min(BUCKET_BYTES, gradient_bytes)) if ring.ranks > 1 else 0.0
    ranks = []
    for node_rank, host in enumerate(hosts):
        for local in range(ranks_per_node):
            compute = _compute_us(states[host], local)
            ranks.append(
                _Rank(
                    node_rank * ranks_per_node + local, host, local, compute / 3, compute * 2 / 3,
                    compute * OPTIMIZER_SHARE, [],
                )
            )  # fmt: skip
    rng = random.Random(f"{seed}:{name}:profiler")
    start = {rank.rank: 1_000_000.0 + rng.uniform(0, 50) for rank in ranks}  # µs; clocks differ a little
    for step in range(1, steps + 1):
        ready: dict[int, list[float]] = {}
        for rank in ranks:
            t0 = start[rank.rank]
            loader = (rank.forward_us + rank.backward_us) * LOADER_SHARE * rng.uniform(0.98, 1.02)
            rank.events.append(
                {
                    "ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step}", "pid": HOST_PID,
                    "tid": HOST_PID, "ts": round(t0, 3), "dur": 0.0, "args": {"External id": step},
                }
            )  # fmt: skip
            at = t0 + loader
            pace = rng.uniform(1 - RANK_JITTER, 1 + RANK_JITTER)  # this rank in this step
            for index in range(FORWARD_KERNELS):
                piece = rank.forward_us / FORWARD_KERNELS * pace * rng.uniform(1 - KERNEL_JITTER, 1 + KERNEL_JITTER)
                kernel = GEMM_KERNEL if index % 3 else ELEMENTWISE_KERNEL
                _kernel(rank, kernel, at, at + piece, COMPUTE_STREAM, max(t0, at - 20))
                at += piece
            times = []
            for _ in range(buckets):
                piece = rank.backward_us / buckets * pace * rng.uniform(1 - KERNEL_JITTER, 1 + KERNEL_JITTER)
                _kernel(rank, GEMM_KERNEL, at, at + piece, COMPUTE_STREAM, max(t0, at - 20))
                at += piece
                times.append(at)
            ready[rank.rank] = times
        done = [0.0] * buckets
        begun = {rank.rank: [0.0] * buckets for rank in ranks}
        previous = 0.0
        for index in range(buckets):
            for rank in ranks:
                begun[rank.rank][index] = max(ready[rank.rank][index], previous)
            joined = max(begun[rank.rank][index] for rank in ranks)
            done[index] = joined + bucket_us * rng.uniform(0.99, 1.01)
            previous = done[index]
        for rank in ranks:
            if bucket_us:
                for index in range(buckets):
                    begin = begun[rank.rank][index]
                    _kernel(rank, NCCL_KERNEL, begin, done[index], NCCL_STREAM, ready[rank.rank][index] - 10)
            finish = done[-1] if bucket_us else ready[rank.rank][-1]
            _kernel(rank, OPTIMIZER_KERNEL, finish, finish + rank.optimizer_us, COMPUTE_STREAM, finish - 15)
            end = finish + rank.optimizer_us
            # The host annotation spans the step as the profiler records it (until the next step begins).
            for event in reversed(rank.events):
                if event.get("name") == f"ProfilerStep#{step}":
                    event["dur"] = round(end - event["ts"], 3)
                    break
            start[rank.rank] = end
    return {rank.rank: _document(rank, len(ranks), states[rank.host]) for rank in ranks}


def _document(rank: _Rank, world_size: int, state: SimulatedNode) -> str:
    gpus = sorted(state.visible_gpus, key=lambda gpu: gpu.index)
    gpu = gpus[rank.local % len(gpus)]
    metadata = [
        {"name": "process_name", "ph": "M", "ts": 0, "pid": HOST_PID, "tid": 0, "args": {"name": "python3"}},
        {"name": "process_labels", "ph": "M", "ts": 0, "pid": HOST_PID, "tid": 0, "args": {"labels": "CPU"}},
        {"name": "process_name", "ph": "M", "ts": 0, "pid": rank.local, "tid": 0, "args": {"name": "python3"}},
        {"name": "process_labels", "ph": "M", "ts": 0, "pid": rank.local, "tid": 0,
         "args": {"labels": f"GPU {rank.local}"}},
    ]  # fmt: skip
    document = {
        "schemaVersion": 1,
        "deviceProperties": [
            {
                "id": rank.local,
                "name": gpu.facts.product_name,
                "totalGlobalMem": gpu.facts.memory_mib * 2**20,
                "computeMajor": 9,
                "computeMinor": 0,
                "numSms": compute_facts(gpu).sms,
            }
        ],  # fmt: skip
        "distributedInfo": {
            "backend": "nccl",
            "rank": rank.rank,
            "world_size": world_size,
            "pg_count": 1,
            "pg_config": [
                {
                    "pg_name": "0",
                    "pg_desc": "default_pg",
                    "backend_config": "cuda:nccl",
                    "pg_size": world_size,
                    "ranks": list(range(min(world_size, 64))),
                }
            ],
            "nccl_version": "2.21.5",
        },  # fmt: skip
        "cuda_driver_version": 12080,
        "cuda_runtime_version": 12080,
        "displayTimeUnit": "ms",
        "baseTimeNanoseconds": 1790857026000000000,
        "traceEvents": metadata + rank.events,
        "traceName": f"/profiler/{rank.host}_{HOST_PID + rank.local}.pt.trace.json",
    }
    return json.dumps(document, indent=1)
