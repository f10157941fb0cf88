from django.apps import AppConfig


class RemediationConfig(AppConfig):
    name = "apps.remediation"
    label = "remediation"
    verbose_name = "Remediation"
