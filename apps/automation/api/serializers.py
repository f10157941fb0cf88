from django.core.validators import RegexValidator
from rest_framework import serializers

from apps.automation import services
from apps.automation.choices import SUBSCRIBABLE_EVENTS, Channel, Timing
from apps.automation.models import Delivery, JobTemplate, Schedule, Subscription, TemplateRun
from apps.core.api import EveryBadField, ReferenceField, StrictCharField, detail_url, page_url
from apps.jobs.api.serializers import KindField, TargetsSerializer
from apps.nodeexec.transports import TRANSPORT_NAMES


class JobTemplateSerializer(EveryBadField, serializers.ModelSerializer):
    id = serializers.UUIDField(source="public_id", read_only=True)
    name = StrictCharField(max_length=100)
    description = StrictCharField(max_length=300, required=False, allow_blank=True)
    kind = KindField(max_length=64, help_text="A registered job kind, e.g. discover or sleep.")
    parameters = serializers.DictField(required=False, default=dict, help_text="Checked by the kind's schema.")
    targets = TargetsSerializer()
    transport = serializers.ChoiceField(
        choices=["", *TRANSPORT_NAMES], required=False, allow_blank=True, help_text="Blank: the default."
    )
    owner = serializers.SlugRelatedField(slug_field="username", read_only=True, allow_null=True)
    url = serializers.SerializerMethodField(help_text="The template in the API.")
    page = serializers.SerializerMethodField(help_text="The template's page in the portal.")

    class Meta:
        model = JobTemplate
        fields = [
            "id",
            "url",
            "page",
            "name",
            "description",
            "kind",
            "parameters",
            "targets",
            "transport",
            "only_idle",
            "owner",
            "created",
            "updated",
        ]
        read_only_fields = ["id", "url", "page", "owner", "created", "updated"]

    def get_url(self, template) -> str:
        return detail_url(template, self.context.get("request"))

    def get_page(self, template) -> str:
        return page_url("automation-template", template, self.context.get("request"))

    def errors_beyond_shape(self, passed: dict, refused: set[str]) -> dict:
        # A field not sent keeps the template's value (PATCH); one refused is not judged.
        current = services.template_fields(self.instance)
        given = {key: None if key in refused else passed.get(key, value) for key, value in current.items()}
        return services.template_errors(template=self.instance, **given)


class TemplateRunSerializer(serializers.ModelSerializer):
    template = serializers.SlugRelatedField(slug_field="name", read_only=True)
    schedule = serializers.SlugRelatedField(slug_field="name", read_only=True, allow_null=True)
    job = serializers.SlugRelatedField(slug_field="public_id", read_only=True, allow_null=True)
    requested_by = serializers.SlugRelatedField(slug_field="username", read_only=True, allow_null=True)

    class Meta:
        model = TemplateRun
        fields = ["template", "schedule", "tick", "job", "requested_by", "status", "message", "created"]
        read_only_fields = fields


class ScheduleSerializer(EveryBadField, serializers.ModelSerializer):
    id = serializers.UUIDField(source="public_id", read_only=True)
    name = StrictCharField(max_length=100)
    template = ReferenceField(queryset=JobTemplate.objects.all(), natural_key="name")
    timing = serializers.ChoiceField(choices=Timing.choices, required=False)
    minute = StrictCharField(max_length=60, required=False)
    hour = StrictCharField(max_length=60, required=False)
    day_of_month = StrictCharField(max_length=60, required=False)
    month_of_year = StrictCharField(max_length=60, required=False)
    day_of_week = StrictCharField(max_length=60, required=False)
    every_minutes = serializers.IntegerField(min_value=1, max_value=525600, required=False, allow_null=True)
    owner = serializers.SlugRelatedField(slug_field="username", read_only=True, allow_null=True)
    next_run = serializers.SerializerMethodField()
    url = serializers.SerializerMethodField(help_text="The schedule in the API.")
    page = serializers.SerializerMethodField(help_text="The schedule's page in the portal.")

    class Meta:
        model = Schedule
        fields = [
            "id",
            "url",
            "page",
            "name",
            "template",
            "timing",
            "minute",
            "hour",
            "day_of_month",
            "month_of_year",
            "day_of_week",
            "every_minutes",
            "enabled",
            "owner",
            "last_run_at",
            "next_run",
            "created",
            "updated",
        ]
        read_only_fields = ["id", "url", "page", "owner", "last_run_at", "next_run", "created", "updated"]

    def get_url(self, schedule) -> str:
        return detail_url(schedule, self.context.get("request"))

    def get_page(self, schedule) -> str:
        return page_url("automation-schedule", schedule, self.context.get("request"))

    def get_next_run(self, schedule) -> serializers.DateTimeField(allow_null=True):
        moment = services.next_run(schedule)
        return serializers.DateTimeField().to_representation(moment) if moment else None

    def errors_beyond_shape(self, passed: dict, refused: set[str]) -> dict:
        # A field not sent keeps the schedule's value (PATCH); one refused is not judged.
        return services.schedule_errors(schedule=self.instance, refused=refused, **passed)


_PORT = r"(?:6553[0-5]|655[0-2]\d|65[0-4]\d{2}|6[0-4]\d{3}|[1-5]\d{4}|[1-9]\d{0,3})"
# The same rules as webhooks.check_url, so the schema states them. Blank (which keeps the current value) is the
# fields' allow_blank, not the pattern's: the schema's two choices for the field must not both take "".
WEBHOOK_URL = RegexValidator(
    rf"\Ahttps?://(?:[A-Za-z0-9._~%-]+|\[[0-9A-Fa-f:.]+\])(?::{_PORT})?(?:[/?#][^\s]*)?\Z",
    message="A webhook URL starts with http:// or https:// and names a host (and a port from 1 to 65535).",
)
WEBHOOK_SECRET = RegexValidator(r"\A[\s\S]{16,}\Z", message="Use a shared secret of at least 16 characters.")


class SubscriptionSerializer(serializers.ModelSerializer):
    id = serializers.UUIDField(source="public_id", read_only=True)
    name = StrictCharField(max_length=100)
    channel = serializers.ChoiceField(choices=Channel.choices)
    url = StrictCharField(
        max_length=500,
        required=False,
        allow_blank=True,
        validators=[WEBHOOK_URL],
        help_text="Webhook: http(s) URL (no user or password in it); where it points is checked when saved and sent.",
    )
    secret = StrictCharField(
        max_length=200,
        required=False,
        allow_blank=True,
        write_only=True,
        validators=[WEBHOOK_SECRET],
        help_text="Webhook: the shared secret (16+ characters) that signs each request; never returned.",
    )
    has_secret = serializers.BooleanField(read_only=True)
    recipients = serializers.ListField(
        child=serializers.EmailField(), required=False, help_text="E-mail: the addresses.", source="recipient_list"
    )
    events = serializers.ListField(child=serializers.ChoiceField(choices=SUBSCRIBABLE_EVENTS), min_length=1)
    owner = serializers.SlugRelatedField(slug_field="username", read_only=True, allow_null=True)

    class Meta:
        model = Subscription
        fields = [
            "id",
            "name",
            "channel",
            "url",
            "secret",
            "has_secret",
            "recipients",
            "events",
            "enabled",
            "owner",
            "created",
            "updated",
        ]
        read_only_fields = ["id", "has_secret", "owner", "created", "updated"]


class DeliverySerializer(serializers.ModelSerializer):
    id = serializers.UUIDField(source="public_id", read_only=True)
    subscription = serializers.CharField(
        source="subscription_name", read_only=True, help_text="Its name when this was sent (it may be deleted since)."
    )
    event = serializers.CharField(source="notification.event", read_only=True)
    title = serializers.CharField(source="notification.title", read_only=True)

    class Meta:
        model = Delivery
        fields = [
            "id",
            "subscription",
            "event",
            "title",
            "status",
            "attempts",
            "last_attempt",
            "delivered",
            "response_status",
            "error",
            "created",
        ]
        read_only_fields = fields
