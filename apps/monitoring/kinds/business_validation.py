"""apps/monitoring/kinds/business_validation.py: `business-validation` load-tests an inference service's
OpenAI-compatible endpoint and judges it against the brief's four business criteria (docs/monitoring.md, "Business
validation"). What it reads and writes is apps/monitoring/validation/recording.py; the run itself,
apps/monitoring/validation/measure.py."""

import asyncio
import json
import threading
import uuid

from rest_framework import serializers

from apps.core.threads import thread_connection_returned
from apps.jobs.choices import EventLevel, StepStatus
from apps.jobs.events import emit
from apps.jobs.kinds import CellRecord, JobKind, StepSpec, register_kind
from apps.monitoring.validation import loadtest, measure, recording
from apps.monitoring.validation.runs import KIND
from apps.nodeexec.base import CommandResult, NodeTarget
from apps.workloads.models import InferenceService

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
    name = KIND
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
