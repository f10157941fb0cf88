import django_filters
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import PermissionDenied
from rest_framework.response import Response

from apps.accounts.choices import Role
from apps.automation import notifications, services
from apps.automation.api.serializers import (
    DeliverySerializer,
    JobTemplateSerializer,
    ScheduleSerializer,
    SubscriptionSerializer,
    TemplateRunSerializer,
)
from apps.automation.choices import DeliveryStatus
from apps.automation.models import Delivery, JobTemplate, Schedule, Subscription, TemplateRun
from apps.core.filters import FilterSet
from apps.core.openapi import paginated
from apps.jobs.api.serializers import JobSerializer
from apps.jobs.models import Job


def _owned(view, obj):
    if not services.may_change(view.request.user, obj):
        raise PermissionDenied("Only its owner or an admin may change this.")


class JobTemplateViewSet(viewsets.ModelViewSet):
    """Job templates: a kind with saved parameters and targets. Viewers read; operators create and start them;
    the owner or an admin changes or deletes one."""

    queryset = JobTemplate.objects.select_related("owner").order_by("name", "id")
    serializer_class = JobTemplateSerializer
    lookup_field = "public_id"
    lookup_url_kwarg = "id"
    ordering_fields = ["name", "kind", "created", "updated"]
    search_fields = ["name", "description", "kind"]
    write_role = Role.OPERATOR
    http_method_names = ["get", "post", "patch", "delete", "head", "options"]

    def perform_create(self, serializer):
        serializer.instance = services.save_template(user=self.request.user, **serializer.validated_data)

    def perform_update(self, serializer):
        _owned(self, serializer.instance)
        serializer.instance = services.save_template(
            template=serializer.instance, user=self.request.user, **serializer.validated_data
        )

    def perform_destroy(self, instance):
        _owned(self, instance)
        services.delete_template(template=instance, user=self.request.user)

    @extend_schema(request=None, responses={201: JobSerializer})
    @action(detail=True, methods=["post"])
    def run(self, request, id=None):
        """Start the template's job now (as the caller)."""
        run = services.run_template(template=self.get_object(), requested_by=request.user)
        job = Job.objects.with_progress().select_related("requested_by").get(pk=run.job_id)
        return Response(JobSerializer(job, context=self.get_serializer_context()).data, status=status.HTTP_201_CREATED)

    @extend_schema(responses={200: TemplateRunSerializer(many=True)})
    @paginated  # answers a page: the schema says so
    @action(detail=True, methods=["get"], filter_backends=[])
    def runs(self, request, id=None):
        """The template's starts (by hand and by its schedules), newest first, with their jobs."""
        runs = TemplateRun.objects.filter(template=self.get_object()).select_related(
            "template", "schedule", "job", "requested_by"
        )
        page = self.paginate_queryset(runs)
        return self.get_paginated_response(TemplateRunSerializer(page, many=True).data)


class ScheduleFilterSet(FilterSet):
    enabled = django_filters.BooleanFilter()
    template = django_filters.CharFilter(field_name="template__name")

    class Meta:
        model = Schedule
        fields = ["enabled", "template"]


class ScheduleViewSet(viewsets.ModelViewSet):
    """Schedules of job templates (crontab or every N minutes), kept in django-celery-beat's tables; each tick runs
    once. PATCH `enabled` to enable or disable. Viewers read; operators create; the owner or an admin changes."""

    queryset = Schedule.objects.select_related("template", "owner").order_by("name", "id")
    serializer_class = ScheduleSerializer
    filterset_class = ScheduleFilterSet
    lookup_field = "public_id"
    lookup_url_kwarg = "id"
    ordering_fields = ["name", "created", "last_run_at"]
    write_role = Role.OPERATOR
    http_method_names = ["get", "post", "patch", "delete", "head", "options"]

    def perform_create(self, serializer):
        serializer.instance = services.save_schedule(user=self.request.user, **serializer.validated_data)

    def perform_update(self, serializer):
        _owned(self, serializer.instance)
        serializer.instance = services.save_schedule(
            schedule=serializer.instance, user=self.request.user, **serializer.validated_data
        )

    def perform_destroy(self, instance):
        _owned(self, instance)
        services.delete_schedule(schedule=instance, user=self.request.user)

    @extend_schema(responses={200: TemplateRunSerializer(many=True)})
    @paginated  # answers a page: the schema says so
    @action(detail=True, methods=["get"], filter_backends=[])
    def runs(self, request, id=None):
        """The ticks this schedule ran, newest first, with the job each started (or why none did)."""
        runs = self.get_object().runs.select_related("template", "schedule", "job", "requested_by")
        page = self.paginate_queryset(runs)
        return self.get_paginated_response(TemplateRunSerializer(page, many=True).data)


class SubscriptionViewSet(viewsets.ModelViewSet):
    """Notification subscriptions (webhook or e-mail) and the events they receive. Viewers read (never a secret);
    admins manage them."""

    queryset = Subscription.objects.select_related("owner").order_by("name", "id")
    serializer_class = SubscriptionSerializer
    lookup_field = "public_id"
    lookup_url_kwarg = "id"
    ordering_fields = ["name", "created"]
    write_role = Role.ADMIN
    http_method_names = ["get", "post", "patch", "delete", "head", "options"]

    def _save(self, serializer, subscription=None):
        data = dict(serializer.validated_data)
        if "recipient_list" in data:
            data["recipients"] = "\n".join(data.pop("recipient_list"))
        serializer.instance = notifications.save_subscription(subscription=subscription, user=self.request.user, **data)

    def perform_create(self, serializer):
        self._save(serializer)

    def perform_update(self, serializer):
        self._save(serializer, serializer.instance)

    @extend_schema(request=None, responses={201: DeliverySerializer})
    @action(detail=True, methods=["post"])
    def test(self, request, id=None):
        """Send a test notification to this subscription (see its delivery in /api/deliveries/)."""
        delivery = notifications.send_test(subscription=self.get_object(), user=request.user)
        delivery = Delivery.objects.select_related("notification").get(pk=delivery.pk)
        return Response(DeliverySerializer(delivery).data, status=status.HTTP_201_CREATED)


class DeliveryFilterSet(FilterSet):
    status = django_filters.MultipleChoiceFilter(choices=DeliveryStatus.choices)
    subscription = django_filters.CharFilter(field_name="subscription_name")
    event = django_filters.CharFilter(field_name="notification__event")

    class Meta:
        model = Delivery
        fields = ["status", "subscription", "event"]


class DeliveryViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """The delivery log: every notification sent to every subscription, its attempts and the last answer."""

    queryset = Delivery.objects.select_related("notification").order_by("-created", "-id")
    serializer_class = DeliverySerializer
    filterset_class = DeliveryFilterSet
    lookup_field = "public_id"
    lookup_url_kwarg = "id"
    ordering_fields = ["created", "status"]
