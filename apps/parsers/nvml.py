"""JSON written by Rackpilot's NVML probes (pynvml): a one-shot device snapshot and a sampled time series."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from .common import Result, load_json, require_dict, to_float, to_int
from .errors import ParseError
from .nvidia_smi import decode_clocks_event_reasons

STRUCT_FIELD = re.compile(r"(\w+): ([^,()]+)")


def struct_fields(text: Any) -> dict[str, str]:
    """pynvml prints structs as 'c_nvmlMemory_t(total: 150754820096 B, free: ...)'; this gives their fields."""
    if not isinstance(text, str):
        return {}
    body = text[text.find("(") + 1 : text.rfind(")")] if "(" in text else text
    return {key: value.strip() for key, value in STRUCT_FIELD.findall(body)}


def _pair(value: Any) -> tuple[Any, Any]:
    return (value[0], value[1]) if isinstance(value, list) and len(value) == 2 else (None, None)


@dataclass
class NvlinkState(Result):
    link: int
    state: str | None
    error: str | None


@dataclass
class NvmlSnapshot(Result):
    driver_version: str | None
    nvml_version: str | None
    cuda_driver_version: int | None
    device_count: int | None
    name: str | None
    uuid: str | None
    serial: str | None
    pci_bus_id: str | None
    memory_total_bytes: int | None
    memory_used_bytes: int | None
    memory_free_bytes: int | None
    utilization_gpu_pct: float | None
    utilization_memory_pct: float | None
    temperature_c: float | None
    power_w: float | None
    power_limit_w: float | None
    power_min_limit_w: float | None
    power_max_limit_w: float | None
    energy_j: float | None
    clocks_sm_mhz: float | None
    clocks_mem_mhz: float | None
    clocks_max_sm_mhz: float | None
    clocks_max_mem_mhz: float | None
    pcie_gen_current: int | None
    pcie_gen_max: int | None
    pcie_width_current: int | None
    pcie_width_max: int | None
    ecc_enabled: bool | None
    persistence_mode: bool | None
    mig_enabled: bool | None
    clocks_event_reasons: list[str] | None
    compute_capability: str | None
    cuda_cores: int | None
    nvlinks: list[NvlinkState] = field(default_factory=list)


def parse_nvml_snapshot(text: str) -> NvmlSnapshot:
    data = require_dict(load_json(text, "an NVML snapshot (JSON)"), "an NVML snapshot")
    if "nvml" not in data and "mem" not in data:
        raise ParseError("expected an NVML snapshot with 'nvml' and 'mem' fields", line=1)
    memory, pci, util = struct_fields(data.get("mem")), struct_fields(data.get("pci")), struct_fields(data.get("util"))
    min_limit, max_limit = _pair(data.get("power_constraints"))
    ecc_current, _ = _pair(data.get("ecc_mode"))
    mig_current, _ = _pair(data.get("mig_mode"))
    major, minor = _pair(data.get("cc"))
    throttle = to_int(data.get("throttle"))
    return NvmlSnapshot(
        driver_version=data.get("driver"),
        nvml_version=data.get("nvml"),
        cuda_driver_version=to_int(data.get("cuda_driver")),
        device_count=to_int(data.get("count")),
        name=data.get("name"),
        uuid=data.get("uuid"),
        serial=data.get("serial"),
        pci_bus_id=pci.get("busId"),
        memory_total_bytes=to_int(memory.get("total")),
        memory_used_bytes=to_int(memory.get("used")),
        memory_free_bytes=to_int(memory.get("free")),
        utilization_gpu_pct=to_float(util.get("gpu")),
        utilization_memory_pct=to_float(util.get("memory")),
        temperature_c=to_float(data.get("temp")),
        power_w=_milli(data.get("power_mw")),
        power_limit_w=_milli(data.get("power_limit_mw")),
        power_min_limit_w=_milli(min_limit),
        power_max_limit_w=_milli(max_limit),
        energy_j=_milli(data.get("energy_mj")),
        clocks_sm_mhz=to_float(data.get("clock_sm")),
        clocks_mem_mhz=to_float(data.get("clock_mem")),
        clocks_max_sm_mhz=to_float(data.get("max_clock_sm")),
        clocks_max_mem_mhz=to_float(data.get("max_clock_mem")),
        pcie_gen_current=to_int(data.get("pcie_gen")),
        pcie_gen_max=to_int(data.get("pcie_gen_max")),
        pcie_width_current=to_int(data.get("pcie_width")),
        pcie_width_max=to_int(data.get("pcie_width_max")),
        ecc_enabled=None if ecc_current is None else bool(ecc_current),
        persistence_mode=None if data.get("persistence") is None else bool(data.get("persistence")),
        mig_enabled=None if mig_current is None else bool(mig_current),
        clocks_event_reasons=None if throttle is None else decode_clocks_event_reasons(throttle),
        compute_capability=f"{major}.{minor}" if major is not None else None,
        cuda_cores=to_int(data.get("num_cores")),
        nvlinks=[_nvlink(item) for item in data.get("nvlink") or [] if isinstance(item, dict)],
    )


def _milli(value: Any) -> float | None:
    number = to_float(value)
    return None if number is None else number / 1000


def _nvlink(item: dict[str, Any]) -> NvlinkState:
    state = str(item.get("state", ""))
    error = state[len("ERR ") :] if state.startswith("ERR ") else None
    return NvlinkState(link=to_int(item.get("link")) or 0, state=None if error else state or None, error=error)


@dataclass
class NvmlSample(Result):
    t: float
    gpu_util_pct: float | None
    mem_util_pct: float | None
    power_w: float | None
    temperature_c: float | None
    sm_mhz: float | None
    energy_j: float | None


@dataclass
class NvmlTimeseries(Result):
    samples: list[NvmlSample]
    duration_s: float
    mean_gpu_util_pct: float | None
    mean_power_w: float | None
    max_power_w: float | None
    energy_j: float | None  # from the energy counter: last minus first


def parse_nvml_timeseries(text: str) -> NvmlTimeseries:
    data = load_json(text, "an NVML time series (JSON list of samples)")
    if not isinstance(data, list) or not all(isinstance(item, dict) and "t" in item for item in data):
        raise ParseError("expected a JSON list of samples with a 't' field", line=1)
    samples = [_sample(item) for item in data]
    return NvmlTimeseries(
        samples=samples,
        duration_s=round(samples[-1].t - samples[0].t, 3) if samples else 0.0,
        mean_gpu_util_pct=_mean([sample.gpu_util_pct for sample in samples]),
        mean_power_w=_mean([sample.power_w for sample in samples]),
        max_power_w=max((s.power_w for s in samples if s.power_w is not None), default=None),
        energy_j=_energy(samples),
    )


def _sample(item: dict[str, Any]) -> NvmlSample:
    return NvmlSample(
        t=float(item["t"]),
        gpu_util_pct=to_float(item.get("gpu_util")),
        mem_util_pct=to_float(item.get("mem_util")),
        power_w=_milli(item.get("power_mw")),
        temperature_c=to_float(item.get("temp_c")),
        sm_mhz=to_float(item.get("sm_mhz")),
        energy_j=_milli(item.get("energy_mj")),
    )


def _mean(values: list[float | None]) -> float | None:
    present = [value for value in values if value is not None]
    return round(sum(present) / len(present), 3) if present else None


def _energy(samples: list[NvmlSample]) -> float | None:
    counters = [sample.energy_j for sample in samples if sample.energy_j is not None]
    return round(counters[-1] - counters[0], 3) if len(counters) > 1 else None
