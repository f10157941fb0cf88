from django.contrib import admin
from django.contrib.auth.admin import UserAdmin

from apps.accounts.models import User


@admin.register(User)
class RackpilotUserAdmin(UserAdmin):
    list_display = ["username", "email", "role", "is_active", "last_login"]
    list_filter = ["role", "is_active"]
    fieldsets = UserAdmin.fieldsets + (("Rackpilot", {"fields": ["role"]}),)
    add_fieldsets = UserAdmin.add_fieldsets + (("Rackpilot", {"fields": ["role"]}),)
