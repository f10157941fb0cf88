from django.contrib import admin

from apps.remediation.forms import WindowForm
from apps.remediation.models import MaintenanceWindow


@admin.register(MaintenanceWindow)
class MaintenanceWindowAdmin(admin.ModelAdmin):
    """Maintenance windows have their page (/remediation/windows/) and API; here the same rules apply."""

    form = WindowForm
    list_display = ["__str__", "starts", "ends"]
