"""The simulated exporters: dcgm-exporter's /metrics and node_exporter's (its NICs) for each node, and vLLM's /metrics
for each inference service, in their real formats, served over HTTP on the loopback for a Prometheus to scrape.

dcgm-exporter and node_exporter are Go programs that print their own text (HELP and TYPE lines, then the samples;
dcgm-exporter's labels gpu, UUID, pci_bus_id, device, modelName, Hostname); they are written here the same way. vLLM
uses prometheus_client, so its page is written with prometheus_client too. The workloads come from a callable the
feature layer hands over (the simulator does not read the workloads app).
"""

import json
import logging
import re
import threading
import time
import uuid
from collections.abc import Callable, Hashable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import Metric

from apps.nodeexec.sim_telemetry import split_counters
from apps.simulator import clock
from apps.simulator.serving import Engine, EngineUnavailable, Request, RequestError, ServingLedger, parse_request
from apps.simulator.telemetry import (
    LATENCY_BUCKETS,
    PROMPT_TOKENS_PER_OUTPUT_TOKEN,
    ClusterTelemetry,
    ServingRun,
    Workloads,
)

logger = logging.getLogger(__name__)


class NodeSilent(Exception):
    """The node's exporters do not answer: its OS hung (node_hang), or its BMC turned it off."""


# (field, reading key, type, help) in dcgm-exporter's default-counters.csv order and wording (the row-remap failure's
# from default-counters.csv; the PCIe link's, which a counters file adds, from DCGM's field descriptions).
DCGM_FIELDS = [
    ("DCGM_FI_DEV_SM_CLOCK", "sm_mhz", "gauge", "SM clock frequency (in MHz)."),
    ("DCGM_FI_DEV_MEM_CLOCK", "mem_mhz", "gauge", "Memory clock frequency (in MHz)."),
    ("DCGM_FI_DEV_MEMORY_TEMP", "memory_temperature_c", "gauge", "Memory temperature (in C)."),
    ("DCGM_FI_DEV_GPU_TEMP", "temperature_c", "gauge", "GPU temperature (in C)."),
    ("DCGM_FI_DEV_POWER_USAGE", "power_w", "gauge", "Power draw (in W)."),
    ("DCGM_FI_DEV_POWER_MGMT_LIMIT", "power_limit_w", "gauge", "Current power limit (in W)."),
    (
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
        "energy_mj",
        "counter",
        "Total energy consumption since boot (in mJ).",
    ),
    ("DCGM_FI_DEV_GPU_UTIL", "util", "gauge", "GPU utilization (in %)."),
    ("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "reasons", "gauge", "Current clock event reasons (bitmask)."),
    ("DCGM_FI_DEV_XID_ERRORS", "xid", "gauge", "Value of the last XID error encountered."),
    ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "ecc_dbe", "counter", "Total number of double-bit volatile ECC errors."),
    ("DCGM_FI_DEV_ROW_REMAP_PENDING", "remap_pending", "gauge", "Whether remapping of rows is pending."),
    ("DCGM_FI_DEV_ROW_REMAP_FAILURE", "remap_failure", "gauge", "Whether remapping of rows has failed"),
    ("DCGM_FI_DEV_PCIE_LINK_GEN", "pcie_gen", "gauge", "PCIe Current Link Generation."),
    ("DCGM_FI_DEV_PCIE_LINK_WIDTH", "pcie_width", "gauge", "PCIe Current Link Width."),
    ("DCGM_FI_DEV_PCIE_MAX_LINK_GEN", "pcie_max_gen", "gauge", "PCIe Max Link Generation."),
    ("DCGM_FI_DEV_PCIE_MAX_LINK_WIDTH", "pcie_max_width", "gauge", "PCIe Max Link Width."),
    (
        "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
        "nvlink_crc_errors",
        "counter",
        "Total number of NVLink flow-control CRC errors.",
    ),
    ("DCGM_FI_DEV_FB_FREE", "fb_free_mib", "gauge", "Frame buffer memory free (in MiB)."),
    ("DCGM_FI_DEV_FB_USED", "fb_used_mib", "gauge", "Frame buffer memory used (in MiB)."),
    ("DCGM_FI_PROF_SM_ACTIVE", "sm_active", "gauge", "The ratio of cycles an SM has at least 1 warp assigned."),
    ("DCGM_FI_PROF_DRAM_ACTIVE", "dram_active", "gauge", "Ratio of cycles the device memory interface is active."),
]
# What a GPU that fell off the bus still shows: the XID the driver logged.
LOST_GPU_FIELDS = {"DCGM_FI_DEV_XID_ERRORS"}
# Each NVLink link's state (NVML's: 1 active, 0 inactive), a link-level field: one series per GPU and link, the link
# under `nvlink` as dcgm-exporter labels its link entities. Not in default-counters.csv: the exporter's CSV lists it.
NVLINK_STATE_FIELD = ("DCGM_FI_DEV_NVLINK_GET_STATE", "gauge", "NVLink state (1: active, 0: inactive).")
# The tray's IMEX daemon status (a global field, read from nvidia-imex-ctl -q: 5 READY, 7 UNAVAILABLE), on the trays
# of a rack-scale domain only; labelled with the host alone. Not in default-counters.csv either.
IMEX_DAEMON_FIELD = ("DCGM_FI_IMEX_DAEMON_STATUS", "gauge", "IMEX daemon status.")


def _value(value) -> str:
    return str(value) if isinstance(value, int) else f"{value:f}"  # DCGM prints integers bare, doubles with %f


def dcgm_exposition(model: ClusterTelemetry, hostname: str, t: float) -> str:
    """The node's dcgm-exporter page at time t."""
    regime = model.node_regime(hostname, t)
    readings = [(gpu, model.gpu_reading(hostname, gpu.index, t), state) for gpu, state in regime.gpus]
    lines = []
    for name, key, kind, help_text in DCGM_FIELDS:
        lines += [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"]
        for gpu, reading, state in readings:
            labels = (
                f'gpu="{gpu.index}",UUID="{gpu.uuid}",pci_bus_id="{gpu.pci_bus_id}",device="nvidia{gpu.index}",'
                f'modelName="{gpu.facts.product_name}",Hostname="{hostname}"'
            )
            if reading is not None:
                lines.append(f"{name}{{{labels}}} {_value(reading[key])}")
            elif name in LOST_GPU_FIELDS:
                lines.append(f"{name}{{{labels}}} {state.xid}")
    name, kind, help_text = NVLINK_STATE_FIELD
    lines += [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"]
    gpus = {gpu.index: gpu for gpu, _ in regime.gpus}
    for index, links, down in model.nvlink_readings(hostname, t):
        gpu = gpus[index]
        labels = f'gpu="{index}",UUID="{gpu.uuid}",pci_bus_id="{gpu.pci_bus_id}",device="nvidia{index}"'
        for link in range(links):
            lines.append(f'{name}{{{labels},nvlink="{link}",Hostname="{hostname}"}} {int(link not in down)}')
    imex = model.imex_daemon_status(hostname, t)
    if imex is not None:
        name, kind, help_text = IMEX_DAEMON_FIELD
        lines += [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}", f'{name}{{Hostname="{hostname}"}} {imex}']
    return "\n".join(lines) + "\n"


# node_exporter's series of a node's NICs (netclass, netdev and infiniband collectors), with its HELP wording.
NODE_NIC_FIELDS = [
    ("node_network_up", "gauge", "Value is 1 if operstate is 'up', 0 otherwise."),
    ("node_network_speed_bytes", "gauge", "Network device property: speed_bytes"),
    ("node_network_receive_packets_total", "counter", "Network device statistic receive_packets."),
    ("node_network_receive_errs_total", "counter", "Network device statistic receive_errs."),
]
NODE_IB_FIELDS = [
    ("node_infiniband_rate_bytes_per_second", "gauge", "Maximum signal transfer rate"),
    (
        "node_infiniband_symbol_error_total",
        "counter",
        "Number of minor link errors detected on one or more physical lanes.",
    ),
]


def node_exposition(model: ClusterTelemetry, hostname: str, t: float) -> str:
    """The node's node_exporter page at time t (its NICs' part): the link rate in bytes per second (a link that is
    down has no speed: node_exporter leaves out the -1 the kernel reports), the receive counters since boot; an RDMA
    device's rate and symbol errors under its infiniband name, port 1."""
    nics = model.nic_readings(hostname, t)
    values = {
        "node_network_up": lambda nic: int(nic["link_up"]),
        "node_network_speed_bytes": lambda nic: nic["speed_gbps"] * 125_000_000 if nic["link_up"] else None,
        "node_network_receive_packets_total": lambda nic: nic["rx_packets"],
        "node_network_receive_errs_total": lambda nic: nic["rx_errors"],
        "node_infiniband_rate_bytes_per_second": lambda nic: nic["speed_gbps"] * 125_000_000,
        "node_infiniband_symbol_error_total": lambda nic: nic["rx_errors"],
    }
    lines = []
    for fields, infiniband in ((NODE_NIC_FIELDS, False), (NODE_IB_FIELDS, True)):
        for name, kind, help_text in fields:
            lines += [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"]
            for nic in nics:
                if infiniband and not nic["rdma_device"]:
                    continue
                labels = f'device="{nic["rdma_device"]}",port="1"' if infiniband else f'device="{nic["name"]}"'
                value = values[name](nic)
                if value is not None:
                    lines.append(f"{name}{{{labels}}} {value}")
    return "\n".join(lines) + "\n"


class _VllmCollector:
    def __init__(self, model: ClusterTelemetry, run: ServingRun, t: float):
        self.model, self.run, self.t = model, run, t

    def _served_tokens(self) -> float:
        """Generated tokens the endpoint served since the restart (their prompts are counted as they came)."""
        if self.model.ledger is None:
            return 0.0
        return self.model.ledger.window_sum(self.run.name, self.model.restarted(self.run, self.t), self.t)[0]

    def collect(self):
        labels = {"model_name": self.run.model}
        counters = split_counters(self.model.service_counters(self.run, self.t))
        gauges = self.model.service_gauges(self.run, self.t)
        for name, help_text, value in [
            ("vllm:num_requests_running", "Number of requests in model execution batches.", gauges["running"]),
            ("vllm:num_requests_waiting", "Number of requests waiting to be processed.", gauges["waiting"]),
        ]:
            metric = Metric(name, help_text, "gauge")
            metric.add_sample(name, labels, float(value))
            yield metric
        served = self.model.served_prompt_tokens(self.run, self.t)
        prompt = (counters["generation_tokens"] - self._served_tokens()) * PROMPT_TOKENS_PER_OUTPUT_TOKEN + served
        for name, help_text, value in [
            ("vllm:prompt_tokens", "Number of prefill tokens processed.", prompt),
            ("vllm:generation_tokens", "Number of generation tokens processed.", counters["generation_tokens"]),
            ("vllm:request_success", "Count of successfully processed requests.", counters["requests"]),
        ]:
            metric = Metric(name, help_text, "counter")
            metric.add_sample(
                f"{name}_total",
                {**labels, **({"finished_reason": "stop"} if "success" in name else {})},
                float(int(value)),
            )
            yield metric
        for name, help_text, buckets, total in [
            (
                "vllm:e2e_request_latency_seconds",
                "Histogram of e2e request latency in seconds.",
                counters["e2e_buckets"],
                counters["e2e_sum"],
            ),
            (
                "vllm:time_to_first_token_seconds",
                "Histogram of time to first token in seconds.",
                counters["ttft_buckets"],
                counters["ttft_sum"],
            ),
        ]:
            metric = Metric(name, help_text, "histogram")
            count = float(int(counters["requests"]))
            for le, value in zip(LATENCY_BUCKETS, buckets, strict=True):
                metric.add_sample(f"{name}_bucket", {**labels, "le": str(le)}, float(min(int(value), count)))
            metric.add_sample(f"{name}_bucket", {**labels, "le": "+Inf"}, count)
            metric.add_sample(f"{name}_count", labels, count)
            metric.add_sample(f"{name}_sum", labels, total)
            yield metric


def vllm_exposition(model: ClusterTelemetry, service: str, t: float) -> str:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_VllmCollector(model, model.service(service), t))
    return generate_latest(registry).decode()


NODE_PATH = re.compile(r"^/nodes/([^/]+)/metrics$")
NODE_EXPORTER_PATH = re.compile(r"^/nodes/([^/]+)/node-metrics$")  # node_exporter's page, beside dcgm-exporter's
SERVICE_PATH = re.compile(r"^/services/([^/]+)/metrics$")
# The OpenAI-compatible API of a simulated service: its base URL is /services/<name>/v1 (vLLM's /metrics sits beside
# /v1, as on a real server).
API_PATH = re.compile(r"^/services/([^/]+)/v1/(completions|chat/completions|models)$")
FLUSH_SECONDS = 1.0
LEDGER_DAYS = 8  # the ledger held in memory: the 7-day window and a day's margin


def _error(message: str, code: int) -> dict:
    kind = {400: "BadRequestError", 404: "NotFoundError", 503: "ServiceUnavailableError"}.get(code, "Error")
    return {"object": "error", "message": message, "type": kind, "param": None, "code": code}


def _usage(prompt: int, completion: int) -> dict:
    return {
        "prompt_tokens": prompt,
        "total_tokens": prompt + completion,
        "completion_tokens": completion,
        "prompt_tokens_details": None,
    }


def completion_chunks(engine: Engine, run: ServingRun, request: Request):
    """The response as vLLM writes it: one JSON document, or SSE `data:` lines ending with `data: [DONE]`."""
    ident = ("chatcmpl-" if request.chat else "cmpl-") + uuid.uuid4().hex
    created = int(time.time())
    head = {
        "id": ident,
        "object": "chat.completion.chunk" if request.chat else "text_completion",
        "created": created,
        "model": run.model,
    }
    pieces, count = [], 0
    if request.stream and request.chat:
        first = {"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": None, "finish_reason": None}
        yield f"data: {json.dumps({**head, 'choices': [first]})}\n\n"
    for text, _ in engine.serve(run, request):
        count += 1
        if not request.stream:
            pieces.append(text)
            continue
        if request.chat:
            choice = {"index": 0, "delta": {"content": text}, "logprobs": None, "finish_reason": None}
        else:
            choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": None, "stop_reason": None}
        yield f"data: {json.dumps({**head, 'choices': [choice]})}\n\n"
    finish = "length" if count >= request.max_tokens else "stop"
    usage = _usage(request.prompt_tokens, count)
    if not request.stream:
        text = "".join(pieces)
        if request.chat:
            choice = {
                "index": 0,
                "message": {"role": "assistant", "content": text, "tool_calls": []},
                "logprobs": None,
                "finish_reason": finish,
                "stop_reason": None,
            }
            body = {**head, "object": "chat.completion", "choices": [choice], "usage": usage, "prompt_logprobs": None}
        else:
            choice = {
                "index": 0,
                "text": text,
                "logprobs": None,
                "finish_reason": finish,
                "stop_reason": None,
                "prompt_logprobs": None,
            }
            body = {**head, "choices": [choice], "usage": usage}
        yield json.dumps(body)
        return
    last = (
        {"index": 0, "delta": {"content": ""}, "logprobs": None, "finish_reason": finish, "stop_reason": None}
        if request.chat
        else {"index": 0, "text": "", "logprobs": None, "finish_reason": finish, "stop_reason": None}
    )
    yield f"data: {json.dumps({**head, 'choices': [last]})}\n\n"
    if request.include_usage:
        yield f"data: {json.dumps({**head, 'choices': [], 'usage': usage})}\n\n"
    yield "data: [DONE]\n\n"


class ExporterServer:
    """Serves /nodes/<hostname>/metrics (dcgm-exporter), /nodes/<hostname>/node-metrics (node_exporter) and
    /services/<name>/metrics from a model checked every `refresh` s (so a fault injected or a workload added shows
    within seconds). `build(workloads)` makes the model; `workloads()` says what runs now; `stamp()`, where given,
    says what the inventory the model is built from looks like (apps.simulator.services.telemetry_inputs_stamp): the
    model is rebuilt only when it or the workloads moved. A fleet's model costs seconds of CPU to build (4.5 s at
    2,048 nodes), which rebuilt every 5 s left the scrapes too little of the process; the model itself is a function of
    time and needs no rebuild for the clock to move. Without `stamp`, rebuilt at every check."""

    def __init__(
        self,
        *,
        build: Callable[[Workloads], ClusterTelemetry],
        workloads: Callable[[], Workloads],
        stamp: Callable[[], Hashable] | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        refresh: float = 5.0,
        store: Callable[[list], None] | None = None,
    ):
        self.build, self.workloads, self.stamp, self.refresh, self.store = build, workloads, stamp, refresh, store
        self.ledger: ServingLedger | None = (
            None  # what the endpoints served: the first model's (stored) ledger, then ours
        )
        self.engine = Engine(model=self.model, ledger=ServingLedger())
        self._stopping = threading.Event()
        self._model: ClusterTelemetry | None = None
        self._built_from: tuple | None = None  # (stamp, workloads) of the model served
        self._checked = 0.0
        self._rebuilding = False
        self.builds = 0  # how many models were built (a test reads it)
        self._serving = False
        self._lock = threading.Lock()
        self.httpd = ThreadingHTTPServer((host, port), self._handler())
        self.httpd.daemon_threads = True

    @property
    def port(self) -> int:
        return self.httpd.server_address[1]

    def model(self) -> ClusterTelemetry:
        """The current model; a stale one is rebuilt in the background while scrapes keep reading the old one (a
        rebuild reads the whole inventory, and a scrape that waits for it would miss Prometheus's timeout)."""
        with self._lock:
            if self._model is None:
                inputs = self._inputs()
                self._serve(self.build(inputs[1]), inputs)
            elif time.monotonic() - self._checked > self.refresh and not self._rebuilding:
                self._rebuilding = True
                threading.Thread(target=self.refresh_model, name="sim-exporters-rebuild", daemon=True).start()
            return self._model

    def _inputs(self) -> tuple:
        return (self.stamp() if self.stamp is not None else None, self.workloads())

    def _serve(self, model: ClusterTelemetry, inputs: tuple) -> None:
        """Serve this model from now on (the caller holds the lock)."""
        self._model, self._built_from, self._checked = self._with_ledger(model), inputs, time.monotonic()
        self.builds += 1

    def _with_ledger(self, model: ClusterTelemetry) -> ClusterTelemetry:
        """The model with this process's ledger: the one it was first built with (what earlier processes stored), kept
        in memory and added to from then on."""
        if self.ledger is None:
            self.ledger = model.ledger if model.ledger is not None else ServingLedger()
            self.engine.ledger = self.ledger
        model.ledger = self.ledger
        return model

    def _flush(self) -> None:
        """Store what the endpoints served, every second (other processes' models read it from there)."""
        while not self._stopping.wait(FLUSH_SECONDS):
            if self.ledger is None or self.store is None:
                continue
            rows = self.ledger.take_dirty()
            if not rows:
                continue
            try:
                self.store(rows)
            except Exception:
                logger.exception("could not store what the simulated endpoints served")
            self.ledger.forget_before(int(time.time() - LEDGER_DAYS * 86400))

    def refresh_model(self) -> None:
        """Rebuild the model where its inputs moved since it was built (the scrapes start it every `refresh` s)."""
        try:
            inputs = self._inputs()
            if self.stamp is not None and inputs == self._built_from:
                self._checked = time.monotonic()  # nothing moved: the model served is still the inventory's
                return
            model = self.build(inputs[1])
            with self._lock:
                self._serve(model, inputs)
        except Exception:
            logger.exception("could not rebuild the simulated exporters' model")
        finally:
            self._rebuilding = False

    def page(self, path: str) -> str | None:
        """The exposition at `path`; None: no such node or service. NodeSilent: the node's OS hung, so its
        exporters answer nothing (the scrape fails: Prometheus marks the target down and its series stop). The pages
        are read at the simulated cluster's clock (a test sets it)."""
        now = clock.now()
        model = self.model()
        for pattern, exposition in ((NODE_PATH, dcgm_exposition), (NODE_EXPORTER_PATH, node_exposition)):
            if match := pattern.match(path):
                hostname = unquote(match[1])
                if hostname not in model.histories:
                    return None
                if model.node_regime(hostname, now).silent:
                    raise NodeSilent(f"{hostname} does not answer (its OS hung, or it is powered off)")
                return exposition(model, hostname, now)
        if match := SERVICE_PATH.match(path):
            name = unquote(match[1])
            if any(run.name == name for run in model.workloads.serving):
                return vllm_exposition(model, name, now)
        return None

    def api(self, path: str, body: bytes):
        """(status, JSON document or a generator of response text, streaming?) for an OpenAI API request."""
        match = API_PATH.match(path)
        if not match:
            return 404, _error("Not Found", 404), False
        name = unquote(match[1])
        model = self.model()
        run = next((run for run in model.workloads.serving if run.name == name), None)
        if run is None:
            return 404, _error(f"no inference service {name!r} runs on the simulated cluster", 404), False
        if match[2] == "models":
            card = {"id": run.model, "object": "model", "created": int(run.started), "owned_by": "vllm"}
            return 200, {"object": "list", "data": [card]}, False
        try:
            request = parse_request(body, chat=match[2] == "chat/completions", model=run.model)
            if model.service_capacity(run, time.time()) <= 0:
                raise EngineUnavailable(f"{run.name} cannot serve: a node of it lost a GPU")
        except RequestError as error:
            return 400, _error(str(error), 400), False
        except EngineUnavailable as error:
            return 503, _error(str(error), 503), False
        return 200, completion_chunks(self.engine, run, request), request.stream

    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, and chunked streams

            def _json(self, status: int, document: dict) -> None:
                data = json.dumps(document).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(min(length, 1 << 20))
                try:
                    status, answer, stream = server.api(self.path.split("?")[0], body)
                    if isinstance(answer, dict):
                        self._json(status, answer)
                        return
                    if not stream:
                        self._json(status, json.loads("".join(answer)))
                        return
                    self.send_response(200)
                    self.send_header("Content-Type", "text/event-stream; charset=utf-8")
                    self.send_header("Cache-Control", "no-cache")
                    self.send_header("Transfer-Encoding", "chunked")  # as uvicorn sends vLLM's stream
                    self.end_headers()
                    for chunk in answer:
                        data = chunk.encode()
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                        self.wfile.flush()
                    self.wfile.write(b"0\r\n\r\n")
                except (BrokenPipeError, ConnectionResetError):
                    return  # the client went away; the engine counted what it generated
                except Exception:
                    logger.exception("simulated endpoint failed on %s", self.path)
                    self.send_error(500)

            def do_GET(self):
                if API_PATH.match(self.path.split("?")[0]):
                    status, answer, _ = server.api(self.path.split("?")[0], b"")
                    self._json(status, answer)
                    return
                try:
                    body = server.page(self.path.split("?")[0])
                except NodeSilent as silent:  # a real one times out; an error fails the scrape the same way
                    self.send_error(503, str(silent))
                    return
                except Exception:  # a scrape must get an answer; the log says what broke
                    logger.exception("simulated exporter failed on %s", self.path)
                    self.send_error(500)
                    return
                if body is None:
                    self.send_error(404, "no such node or service")
                    return
                data = body.encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format, *args):  # noqa: A002 (the base class's name)
                logger.debug("exporter: " + format, *args)

        return Handler

    def serve_forever(self) -> None:
        self.start_flushing()
        self._serving = True
        self.httpd.serve_forever()

    def start(self) -> threading.Thread:
        thread = threading.Thread(target=self.serve_forever, name="sim-exporters", daemon=True)
        thread.start()
        return thread

    def start_flushing(self) -> threading.Thread:
        thread = threading.Thread(target=self._flush, name="sim-serving-ledger", daemon=True)
        thread.start()
        return thread

    def stop(self) -> None:
        self._stopping.set()
        if self.ledger is not None and self.store is not None and (rows := self.ledger.take_dirty()):
            try:
                self.store(rows)
            except Exception:
                logger.exception("could not store what the simulated endpoints served")
        if self._serving:  # shutdown() waits for serve_forever to return, forever where it never ran
            self.httpd.shutdown()
        self.httpd.server_close()
