"""dcgm-exporter's Prometheus text exposition (also any excerpt of it)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from .common import Result, require_content, shorten
from .errors import ParseError

SAMPLE = re.compile(
    r"^(?P<name>[A-Za-z_:][A-Za-z0-9_:]*)(?:\{(?P<labels>.*)\})?\s+(?P<value>\S+)(?:\s+(?P<timestamp>-?\d+))?\s*$"
)
LABEL = re.compile(r'\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*,?')
COMMENT = re.compile(r"^#\s*(HELP|TYPE)\s+(\S+)(?:\s+(.*))?$")
ELISION = {"...", "[...]"}

# DCGM marks "no value" with sentinels near the type's maximum (dcgm_structs.h: DCGM_INT64_BLANK and up,
# DCGM_FP64_BLANK and up); the exporter prints them as plain numbers.
DCGM_INT64_BLANK = 0x7FFFFFFFFFFFFFF0
DCGM_FP64_BLANK = 140737488355328.0


@dataclass
class MetricSample(Result):
    name: str
    labels: dict[str, str]
    value: float | None  # None when DCGM reported a blank sentinel
    raw_value: str
    line: int

    @property
    def gpu(self) -> str | None:
        return self.labels.get("gpu")


@dataclass
class MetricFamily(Result):
    name: str
    help: str | None = None
    type: str | None = None


@dataclass
class ExporterMetrics(Result):
    families: list[MetricFamily]
    samples: list[MetricSample]
    blank_samples: int = 0

    def values(self, metric: str) -> list[MetricSample]:
        return [sample for sample in self.samples if sample.name == metric]

    def gpus(self) -> list[str]:
        return sorted({sample.gpu for sample in self.samples if sample.gpu is not None}, key=_natural)


def _natural(value: str) -> tuple[int, str]:
    return (int(value), "") if value.isdigit() else (1 << 30, value)


def parse_dcgm_exporter(text: str) -> ExporterMetrics:
    lines = require_content(text, "Prometheus metrics from dcgm-exporter")
    families: dict[str, MetricFamily] = {}
    samples: list[MetricSample] = []
    for number, line in enumerate(lines, start=1):
        stripped = line.strip()
        if not stripped or stripped in ELISION:
            continue
        if stripped.startswith("#"):
            _read_comment(families, stripped)
            continue
        samples.append(_sample(stripped, number))
        families.setdefault(samples[-1].name, MetricFamily(name=samples[-1].name))
    if not any(name.startswith("DCGM_") for name in families):
        raise ParseError("expected dcgm-exporter metrics such as 'DCGM_FI_DEV_GPU_UTIL{gpu=\"0\"} 0'", line=1)
    return ExporterMetrics(
        families=list(families.values()),
        samples=samples,
        blank_samples=sum(sample.value is None for sample in samples),
    )


def _read_comment(families: dict[str, MetricFamily], line: str) -> None:
    match = COMMENT.match(line)
    if not match:
        return
    family = families.setdefault(match[2], MetricFamily(name=match[2]))
    if match[1] == "HELP":
        family.help = match[3]
    else:
        family.type = match[3]


def _sample(line: str, number: int) -> MetricSample:
    match = SAMPLE.match(line)
    if not match:
        raise ParseError(f"expected a metric line 'NAME{{labels}} VALUE', got {shorten(line)}", number)
    labels = _labels(match["labels"] or "", number)
    return MetricSample(
        name=match["name"], labels=labels, value=_value(match["value"], number), raw_value=match["value"], line=number
    )


def _labels(text: str, number: int) -> dict[str, str]:
    labels: dict[str, str] = {}
    position = 0
    while position < len(text):
        match = LABEL.match(text, position)
        if not match:
            raise ParseError(f'expected label pairs name="value", got {shorten(text[position:])}', number)
        labels[match[1]] = match[2].replace('\\"', '"').replace("\\\\", "\\")
        position = match.end()
    return labels


def _value(raw: str, number: int) -> float | None:
    try:
        value = float(raw)
    except ValueError:
        raise ParseError(f"expected a numeric sample value, got {shorten(raw)}", number) from None
    if raw.isdigit() and int(raw) >= DCGM_INT64_BLANK:
        return None
    if value >= DCGM_FP64_BLANK and not raw.isdigit():
        return None
    return value
