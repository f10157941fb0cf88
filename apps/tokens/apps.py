from django.apps import AppConfig


class TokensConfig(AppConfig):
    name = "apps.tokens"
    label = "tokens"
    verbose_name = "API tokens"

    def ready(self) -> None:
        # The schema's description of the token header (drf-spectacular finds extensions by import).
        from apps.tokens import schema  # noqa: F401
