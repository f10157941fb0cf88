"""Fields and stored keys renamed after the fact: "gbps" named figures that hold gigabytes per second (GB/s), and
"gbps" reads as gigabits (a link's rate, which keeps the name). Migrations use this module: what it maps is what
was renamed, so entries are added, never changed."""

from django.db import migrations
from django.db.models import TextField
from django.db.models.functions import Cast

# Keys of stored JSON (a test's series, a sweep's evidence, an acceptance check's details, a cell's event) that hold
# GB/s: the name before, the name now.
GB_PER_S_KEYS = {
    "busbw_gbps": "busbw_gb_per_s",
    "algbw_gbps": "algbw_gb_per_s",
    "in_place_busbw_gbps": "in_place_busbw_gb_per_s",
    "avg_busbw_gbps": "avg_busbw_gb_per_s",
    "peak_busbw_gbps": "peak_busbw_gb_per_s",
    "rail_busbw_gbps": "rail_busbw_gb_per_s",
    "expected_gbps": "expected_gb_per_s",
    "warn_gbps": "warn_gb_per_s",
    "fail_gbps": "fail_gb_per_s",
    "baseline_gbps": "baseline_gb_per_s",
}

# Model fields renamed the same way, for code that fills a migration's historical model (which may predate them).
FORMER_FIELD_NAMES = {
    **{now: before for before, now in GB_PER_S_KEYS.items()},
    "mem_bandwidth_tb_per_s": "mem_bandwidth_tbps",
    "mem_bandwidth_reference_tb_per_s": "mem_bandwidth_reference_tbps",
    "nvlink_gb_per_s": "nvlink_gbps",
}


def as_model_fields(model, values: dict) -> dict:
    """`values` under the names `model` has: a migration's historical model may predate a field (left out) or still
    carry it under its former name."""
    known = {field.name for field in model._meta.get_fields()}
    named = {}
    for name, value in values.items():
        if name in known:
            named[name] = value
        elif FORMER_FIELD_NAMES.get(name) in known:
            named[FORMER_FIELD_NAMES[name]] = value
    return named


def rename_keys(value, names: dict[str, str]):
    """`value` (decoded JSON) with every dict key in `names` renamed, at any depth."""
    if isinstance(value, dict):
        return {names.get(key, key): rename_keys(item, names) for key, item in value.items()}
    if isinstance(value, list):
        return [rename_keys(item, names) for item in value]
    return value


def rename_json_keys(app_label: str, fields: dict[str, list[str]], names: dict[str, str]) -> migrations.RunPython:
    """A migration step that renames `names`' keys inside the JSON `fields` ({model: [field, ...]}) of every row,
    and back when the migration is reversed."""

    def rewrite(apps, names):
        for model_name, field_names in fields.items():
            model = apps.get_model(app_label, model_name)
            for field in field_names:
                # Only rows whose text holds an old key; the rest (most rows of a large table) are not read.
                rows = model.objects.annotate(as_text=Cast(field, TextField()))
                matching = rows.filter(as_text__regex="|".join(f'"{key}"' for key in names)).only("pk", field)
                batch = []
                for row in matching.iterator(chunk_size=500):
                    setattr(row, field, rename_keys(getattr(row, field), names))
                    batch.append(row)
                    if len(batch) == 500:
                        model.objects.bulk_update(batch, [field])
                        batch = []
                model.objects.bulk_update(batch, [field])

    def forward(apps, schema_editor):
        rewrite(apps, names)

    def backward(apps, schema_editor):
        rewrite(apps, {now: before for before, now in names.items()})

    return migrations.RunPython(forward, backward)
