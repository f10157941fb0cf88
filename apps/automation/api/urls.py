"""The automation viewsets, registered on the one API router in portal/urls.py."""

from apps.automation.api.views import DeliveryViewSet, JobTemplateViewSet, ScheduleViewSet, SubscriptionViewSet

ROUTES = [
    ("job-templates", JobTemplateViewSet),
    ("schedules", ScheduleViewSet),
    ("subscriptions", SubscriptionViewSet),
    ("deliveries", DeliveryViewSet),
]
