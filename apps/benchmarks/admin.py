from django.contrib import admin

from apps.benchmarks.models import Baseline, Reference


@admin.register(Reference)
class ReferenceAdmin(admin.ModelAdmin):
    list_display = ["sku_name", "fabric", "scope", "collective", "expected_gbps", "warn_gbps", "fail_gbps"]
    list_filter = ["scope", "collective", "sku_name"]
    list_editable = ["expected_gbps", "warn_gbps", "fail_gbps"]


@admin.register(Baseline)
class BaselineAdmin(admin.ModelAdmin):
    list_display = ["collective", "hosts_key", "busbw_gbps", "accepted_by", "updated"]
    readonly_fields = ["test"]
