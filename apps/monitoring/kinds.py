"""apps/monitoring/kinds.py: `bmc-poll` reads each node's BMC (IPMI or Redfish) and stores its temperatures, fans
and power as series (docs/monitoring.md, "BMC readings"). Run by beat's schedule per site, or asked for by hand.
`business-validation` load-tests an inference service's OpenAI-compatible endpoint and judges it against the brief's
four business criteria (docs/monitoring.md, "Business validation")."""

import asyncio
import json
import threading
import uuid

from django.conf import settings
from django.utils import timezone
from rest_framework import serializers

from apps.core.threads import thread_connection_returned
from apps.jobs.choices import EventLevel, StepStatus
from apps.jobs.events import emit
from apps.jobs.kinds import CellRecord, JobKind, StepSpec, register_kind
from apps.monitoring.bmc import clients, logins, readings
from apps.monitoring.bmc.polling import KIND as BMC_POLL
from apps.monitoring.choices import PollResult
from apps.monitoring.validation import loadtest, measure, recording
from apps.monitoring.validation.runs import KIND as BUSINESS_VALIDATION
from apps.nodeexec.base import CommandResult, NodeTarget
from apps.nodeexec.sim import get_simulator
from apps.workloads.models import InferenceService

STEP = "bmc"
STATUS_OF = {
    PollResult.OK: StepStatus.SUCCEEDED,
    PollResult.PARTIAL: StepStatus.SUCCEEDED,
    PollResult.AUTH_FAILED: StepStatus.FAILED,
    PollResult.UNREACHABLE: StepStatus.FAILED,
    PollResult.ERROR: StepStatus.ERROR,
}


class BmcPollParameters(serializers.Serializer):
    site = serializers.SlugField(
        required=False, allow_blank=True, default="", help_text="The site whose schedule asked for this poll."
    )


@register_kind
class BmcPoll(JobKind):
    name = BMC_POLL
    label = "BMC readings"
    description = (
        "Reads each node's BMC over IPMI (ipmitool sdr, dcmi power reading) or Redfish (Thermal, Power, "
        "EnvironmentMetrics) and stores temperatures, fan speeds and power."
    )
    parameters = BmcPollParameters
    transports = ("local", "sim")  # BMCs are read from the worker's host (the management network), never over ssh
    rerun_on_worker_loss = True  # read-only on the BMCs; readings are written once, when the shard ends

    def __init__(self):
        self.logins: dict[str, tuple[int, logins.BmcLogin]] = {}
        self.outcomes: dict[tuple[str, str], readings.PollOutcome] = {}
        self.transport = "local"
        self.at = timezone.now()
        self.seed, self.load = 0, 0.0

    @property
    def default_transport(self) -> str | None:
        return settings.RACKPILOT_BMC_TRANSPORT or None  # None: the install's, as JobKind.default_transport says

    def steps(self, parameters: dict) -> list[StepSpec]:
        timeout = float(settings.RACKPILOT_BMC_TIMEOUT_SECONDS)
        return [StepSpec(STEP, "", "BMC", timeout=timeout * 4 + 5, stop_on_failure=False)]

    def prepare(self, job, shard) -> None:
        self.logins = logins.shard_logins(shard)
        self.transport = job.transport
        self.at = readings.polled_at(timezone.now())
        simulator = get_simulator()
        self.seed = getattr(simulator, "seed", settings.RACKPILOT_SIM_SEED)
        self.load = getattr(simulator, "load", 0.0)

    def step_runner(self, step: StepSpec):
        timeout = float(settings.RACKPILOT_BMC_TIMEOUT_SECONDS)

        async def read(target: NodeTarget, run) -> CommandResult:
            found = self.logins.get(target.hostname)
            if found is None:
                outcome = readings.PollOutcome(PollResult.ERROR, f"{target.hostname} has no BMC settings")
            else:
                node_id, login = found
                if self.transport == "sim":
                    link = clients.SimulatedBmcLink(login, node_id, seed=self.seed, load=self.load, at=self.at)
                    outcome = await clients.poll(login, ipmi=link.ipmitool, redfish=link.redfish)
                else:
                    ipmi, redfish = clients.local_ipmitool(login, timeout), clients.local_redfish(login, timeout)
                    outcome = await clients.poll(login, ipmi=ipmi, redfish=redfish)
            self.outcomes[target.hostname, step.name] = outcome
            ok = outcome.result in (PollResult.OK, PollResult.PARTIAL)
            return CommandResult(
                exit_code=0 if ok else 1,
                stdout=outcome.transcript.encode(),
                stderr=b"" if ok else (outcome.message + "\n").encode(),
            )

        return read

    def cell_record(self, target: NodeTarget, step: StepSpec, result: CommandResult) -> CellRecord:
        outcome = self.outcomes.get((target.hostname, step.name))
        if outcome is None:  # canceled or timed out before the poll ended
            return super().cell_record(target, step, result)
        return CellRecord(
            STATUS_OF[outcome.result],
            outcome.summary(),
            {"bmc_result": outcome.result, "readings": len(outcome.readings)},
        )

    def shard_finished(self, job, shard) -> None:
        polled = [(hostname, outcome) for (hostname, _), outcome in self.outcomes.items() if hostname in self.logins]
        written = readings.record_polls({self.logins[host][0]: outcome for host, outcome in polled}, at=self.at)
        for hostname, outcome in polled:
            if outcome.result == PollResult.AUTH_FAILED:  # the finding an operator must act on: fix the login
                emit(job, outcome.message, level=EventLevel.ERROR, hostname=hostname, step=STEP)
        emit(job, f"{written} BMC readings stored from {len(polled)} nodes")


# --- business-validation ---------------------------------------------------------------------------------------

VALIDATION_STEP = "load"
VALIDATION_STATUS = {
    "pass": StepStatus.SUCCEEDED,
    "warn": StepStatus.SUCCEEDED,
    "fail": StepStatus.FAILED,
    "could_not_run": StepStatus.ERROR,
}


class BusinessValidationParameters(serializers.Serializer):
    service = serializers.CharField(max_length=100, help_text="The inference service, by name or public id.")
    concurrency = serializers.IntegerField(
        min_value=1, max_value=256, default=32, help_text="Requests in flight at once."
    )
    requests = serializers.IntegerField(
        min_value=1, max_value=100_000, default=512, help_text="Requests sent in all (at least the concurrency)."
    )
    prompt_tokens = serializers.IntegerField(
        min_value=1, max_value=32_768, default=256, help_text="Prompt length of each request, in tokens."
    )
    output_tokens = serializers.IntegerField(
        min_value=1, max_value=4_096, default=64, help_text="Tokens generated per request (ignore_eos)."
    )
    api = serializers.ChoiceField(
        choices=[("completions", "/v1/completions"), ("chat", "/v1/chat/completions")], default="completions"
    )
    timeout_seconds = serializers.FloatField(
        min_value=1, max_value=600, default=60, help_text="Each request's timeout."
    )
    settle_seconds = serializers.FloatField(
        min_value=0,
        max_value=300,
        default=3,
        help_text="Wait after the run before reading energy and utilisation (Prometheus: its scrape interval).",
    )

    def validate_service(self, value: str) -> str:
        service = _service(value)
        if service is None:
            raise serializers.ValidationError(f"No inference service named {value!r}.")
        if not service.nodes.exists():
            raise serializers.ValidationError(f"{service.name} runs on no node.")
        if service.endpoint:
            try:
                loadtest.check_endpoint(service.endpoint)
            except loadtest.EndpointRefused as error:
                raise serializers.ValidationError(f"{service.name}'s endpoint is refused: {error}.") from None
        return service.name

    def validate(self, attrs):
        if attrs.get("requests", 512) < attrs.get("concurrency", 32):
            raise serializers.ValidationError({"requests": ["At least as many requests as the concurrency."]})
        return attrs


def _service(value: str) -> InferenceService | None:
    services = InferenceService.objects.all()
    try:
        return services.filter(public_id=uuid.UUID(value)).first()
    except ValueError:
        return services.filter(name=value).first()


@register_kind
class BusinessValidation(JobKind):
    name = BUSINESS_VALIDATION
    label = "Business validation"
    description = (
        "A serving load test against the inference service's OpenAI-compatible endpoint (streamed completions at a "
        "fixed concurrency), judged against the four business criteria: throughput ≥ 90 % of design tokens/s, p99 "
        "time to first token ≤ the latency target, ≤ 0.5 kWh per million tokens, mean GPU utilisation ≥ 85 %."
    )
    parameters = BusinessValidationParameters
    transports = ("local", "sim")  # the load comes from the worker's host: the simulator's endpoint, or the real one

    def __init__(self):
        self.plan: measure.Plan | None = None
        self.why = ""
        self.service_id: int | None = None
        self.launcher = ""
        self.answers: dict[tuple[str, str], dict] = {}

    def steps(self, parameters: dict) -> list[StepSpec]:
        return [StepSpec(VALIDATION_STEP, "", "Load test", timeout=6 * 3600.0, stop_on_failure=False)]

    def prepare(self, job, shard) -> None:
        self.plan, self.why, self.service_id = recording.validation_plan(job)
        self.launcher = min(job.nodes.values_list("hostname", flat=True), default="")

    def step_runner(self, step: StepSpec):
        async def load(target: NodeTarget, run) -> CommandResult:
            if target.hostname != self.launcher:
                return CommandResult(exit_code=0, stdout=f"the load test runs in {self.launcher}'s cell\n".encode())
            if self.plan is None:
                answer = measure.could_not_run(self.why)
            else:
                stop = threading.Event()
                try:
                    answer = await asyncio.to_thread(self._measure, self.plan, stop)
                except asyncio.CancelledError:
                    stop.set()  # the requests in flight end; no new one starts
                    raise
            self.answers[target.hostname, step.name] = answer
            return CommandResult(
                exit_code=0 if answer["outcome"] in ("pass", "warn") else 1,
                stdout=(json.dumps(answer, indent=1, default=str) + "\n").encode(),
            )

        return load

    @staticmethod
    def _measure(plan: measure.Plan, stop: threading.Event) -> dict:
        with thread_connection_returned():  # the telemetry interface reads the database (the simulator's model)
            return measure.measure(plan, stop=stop)

    def cell_record(self, target: NodeTarget, step: StepSpec, result: CommandResult) -> CellRecord:
        answer = self.answers.get((target.hostname, step.name))
        if answer is None:
            if result.ok and target.hostname != self.launcher:
                return CellRecord(StepStatus.SKIPPED, f"the load test runs in {self.launcher}'s cell")
            return super().cell_record(target, step, result)
        figures = answer.get("figures") or {}
        if answer["outcome"] == "could_not_run" and not figures.get("tokens_per_second"):
            summary = f"could not run: {answer['message']}"
        else:
            summary = f"{answer['outcome']}: " + ", ".join(
                f"{row['label']} {row['value'] if row['value'] is not None else '—'} {row['unit']} ({row['outcome']})"
                for row in answer["verdicts"]
            )
        return CellRecord(
            VALIDATION_STATUS[answer["outcome"]],
            summary[:300],
            {"business_validation": {"outcome": answer["outcome"], "verdicts": answer["verdicts"]}},
        )

    def shard_finished(self, job, shard) -> None:
        answer = self.answers.get((self.launcher, VALIDATION_STEP))
        if answer is None or self.service_id is None:
            if self.why:
                emit(job, f"business validation could not run: {self.why}", level=EventLevel.ERROR)
            return
        validation = recording.record_validation(
            job=job,
            service_id=self.service_id,
            endpoint=self.plan.endpoint if self.plan else "",
            profile={key: value for key, value in job.parameters.items() if key != "service"},
            answer=answer,
        )
        level = {"pass": EventLevel.INFO, "warn": EventLevel.WARNING}.get(validation.outcome, EventLevel.ERROR)
        emit(
            job,
            f"business validation of {self.plan.service if self.plan else '?'}: {validation.outcome}",
            level=level,
            data={"business_validation": str(validation.public_id), "outcome": validation.outcome},
        )
