from django.apps import AppConfig


class DiagnosisConfig(AppConfig):
    name = "apps.diagnosis"
    label = "diagnosis"
    verbose_name = "Fault diagnosis"
