"""JSON written by Rackpilot's PyTorch node benchmark: copy bandwidth, GEMM TFLOP/s, an HPL-MxP-like solve, serving."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .common import Result, load_json, require_dict, to_float, to_int
from .errors import ParseError


@dataclass
class MxpSolve(Result):
    n: int | None
    seconds: float | None
    tflops: float | None
    refine_iters: int | None
    scaled_residual: float | None


@dataclass
class ServingRun(Result):
    model: str | None
    params: int | None
    batch: int | None
    seq: int | None
    requests: int | None
    tokens: int | None
    wall_s: float | None
    tokens_per_s: float | None
    latency_p50_ms: float | None
    latency_p99_ms: float | None
    energy_kwh: float | None
    kwh_per_million_tokens: float | None
    mean_gpu_util_pct: float | None
    mean_power_w: float | None


@dataclass
class TorchBenchmarks(Result):
    torch_version: str | None
    device_name: str | None
    sm_count: int | None
    total_memory_bytes: int | None
    d2d_copy_gb_per_s: float | None  # bytes read + written per second, in GB/s
    read_gb_per_s: float | None
    h2d_pinned_gb_per_s: float | None
    d2h_pinned_gb_per_s: float | None
    gemm_tflops: dict[str, float | None] = field(default_factory=dict)
    hpl_mxp_like: list[MxpSolve] = field(default_factory=list)
    serving: ServingRun | None = None


def parse_torch_benchmarks(text: str) -> TorchBenchmarks:
    data = require_dict(load_json(text, "node benchmark JSON"), "node benchmark JSON")
    if "torch" not in data or "device_name" not in data:
        raise ParseError("expected node benchmark JSON with 'torch' and 'device_name' fields", line=1)
    return TorchBenchmarks(
        torch_version=data.get("torch"),
        device_name=data.get("device_name"),
        sm_count=to_int(data.get("sm_count")),
        total_memory_bytes=to_int(data.get("total_memory")),
        d2d_copy_gb_per_s=to_float(data.get("d2d_copy_GBps")),
        read_gb_per_s=to_float(data.get("read_sum_GBps")),
        h2d_pinned_gb_per_s=to_float(data.get("h2d_pinned_GBps")),
        d2h_pinned_gb_per_s=to_float(data.get("d2h_pinned_GBps")),
        gemm_tflops={str(key): to_float(value) for key, value in (data.get("gemm_tflops") or {}).items()},
        hpl_mxp_like=[_solve(item) for item in data.get("hpl_mxp_like") or [] if isinstance(item, dict)],
        serving=_serving(data["serving"]) if isinstance(data.get("serving"), dict) else None,
    )


def _solve(item: dict[str, Any]) -> MxpSolve:
    return MxpSolve(
        n=to_int(item.get("n")),
        seconds=to_float(item.get("seconds")),
        tflops=to_float(item.get("tflops")),
        refine_iters=to_int(item.get("refine_iters")),
        scaled_residual=to_float(item.get("scaled_residual")),
    )


def _serving(item: dict[str, Any]) -> ServingRun:
    return ServingRun(
        model=item.get("model"),
        params=to_int(item.get("params")),
        batch=to_int(item.get("batch")),
        seq=to_int(item.get("seq")),
        requests=to_int(item.get("requests")),
        tokens=to_int(item.get("tokens")),
        wall_s=to_float(item.get("wall_s")),
        tokens_per_s=to_float(item.get("tokens_per_s")),
        latency_p50_ms=to_float(item.get("latency_p50_ms")),
        latency_p99_ms=to_float(item.get("latency_p99_ms")),
        energy_kwh=to_float(item.get("energy_kwh")),
        kwh_per_million_tokens=to_float(item.get("kwh_per_million_tokens")),
        mean_gpu_util_pct=to_float(item.get("mean_gpu_util")),
        mean_power_w=to_float(item.get("mean_power_w")),
    )
