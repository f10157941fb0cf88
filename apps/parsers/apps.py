from django.apps import AppConfig


class ParsersConfig(AppConfig):
    name = "apps.parsers"
    default_auto_field = "django.db.models.BigAutoField"
    verbose_name = "Tool output parsers"
