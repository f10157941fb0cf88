from django.contrib import admin

from apps.workloads.models import InferenceService, TrainingJob, TrainingJobNode


class TrainingJobNodeInline(admin.TabularInline):
    model = TrainingJobNode
    extra = 0
    raw_id_fields = ["node"]


@admin.register(TrainingJob)
class TrainingJobAdmin(admin.ModelAdmin):
    list_display = ["name", "framework", "launcher", "ranks_per_node", "state", "workload_class"]
    list_filter = ["state", "launcher", "framework"]
    search_fields = ["name"]
    inlines = [TrainingJobNodeInline]


@admin.register(InferenceService)
class InferenceServiceAdmin(admin.ModelAdmin):
    list_display = ["name", "model", "design_tokens_per_second", "latency_target_ms", "state", "workload_class"]
    list_filter = ["state"]
    search_fields = ["name", "model"]
    filter_horizontal = ["nodes"]
