from django.contrib import admin, messages
from django.contrib.auth.admin import UserAdmin
from django.utils import timezone

from apps.accounts import lockout
from apps.accounts.models import SignInLock, User
from apps.core.text import counted


@admin.register(User)
class RackpilotUserAdmin(UserAdmin):
    list_display = ["username", "email", "role", "is_active", "last_login"]
    list_filter = ["role", "is_active"]
    fieldsets = UserAdmin.fieldsets + (("Rackpilot", {"fields": ["role"]}),)
    add_fieldsets = UserAdmin.add_fieldsets + (("Rackpilot", {"fields": ["role"]}),)


@admin.register(SignInLock)
class SignInLockAdmin(admin.ModelAdmin):
    """Sign-in lockouts (apps/accounts/lockout.py): read them, and lift one early."""

    list_display = ["key", "scope", "failures", "created", "locked_until", "lifted_at", "lifted_by"]
    list_filter = ["scope"]
    search_fields = ["key"]
    actions = ["lift_locks"]
    readonly_fields = ["scope", "key", "failures", "created", "locked_until", "lifted_at", "lifted_by"]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    @admin.action(description="Lift the selected sign-in locks")
    def lift_locks(self, request, queryset):
        now = timezone.now()
        lifted = sum(lockout.lift(lock=lock, user=request.user, now=now) for lock in queryset)
        messages.info(request, f"{counted(lifted, 'sign-in lock')} lifted.")
