from django.apps import AppConfig


class AutomationConfig(AppConfig):
    name = "apps.automation"
    label = "automation"
    verbose_name = "Automation: job templates, schedules, notifications"
