from django.contrib import admin, messages
from rest_framework.authtoken.models import TokenProxy

from apps.core.text import counted
from apps.tokens import services
from apps.tokens.models import ApiToken


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    """Read and revoke; tokens are created on the API tokens page, where their secret is shown to their owner."""

    list_display = ["prefix", "name", "user", "created", "expires", "last_used", "revoked"]
    list_filter = ["revoked"]
    search_fields = ["name", "prefix", "user__username"]
    readonly_fields = [field.name for field in ApiToken._meta.fields]
    actions = ["revoke"]

    def has_add_permission(self, request) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False  # revoked tokens stay, so the list says who revoked what and when

    @admin.action(description="Revoke the selected tokens")
    def revoke(self, request, queryset):
        count = sum(services.revoke_token(token=token, by=request.user) for token in queryset.select_related("user"))
        self.message_user(request, f"Revoked {counted(count, 'token')}.", messages.SUCCESS)


# DRF's own token admin made clear-text keys that this portal no longer accepts; its app stays installed only for
# the migration that hashed them (tokens 0002).
if admin.site.is_registered(TokenProxy):
    admin.site.unregister(TokenProxy)
