from django.contrib import admin

from apps.remediation.models import MaintenanceWindow


@admin.register(MaintenanceWindow)
class MaintenanceWindowAdmin(admin.ModelAdmin):
    """Maintenance windows are set here until they have a page of their own."""

    list_display = ["__str__", "starts", "ends"]
