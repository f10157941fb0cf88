from django.contrib import admin

from apps.benchmarks.models import Baseline, Reference


@admin.register(Reference)
class ReferenceAdmin(admin.ModelAdmin):
    list_display = ["sku_name", "fabric", "scope", "collective", "expected_gb_per_s", "warn_gb_per_s", "fail_gb_per_s"]
    list_filter = ["scope", "collective", "sku_name"]
    list_editable = ["expected_gb_per_s", "warn_gb_per_s", "fail_gb_per_s"]


@admin.register(Baseline)
class BaselineAdmin(admin.ModelAdmin):
    list_display = ["collective", "hosts_key", "busbw_gb_per_s", "accepted_by", "updated"]
    readonly_fields = ["test"]
