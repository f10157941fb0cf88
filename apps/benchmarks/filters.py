"""Filters shared by the benchmarks page and GET /api/benchmarks/."""

import django_filters

from apps.benchmarks.choices import Collective, RunStatus, Suite
from apps.benchmarks.models import BenchmarkRun


class BenchmarkRunFilterSet(django_filters.FilterSet):
    suite = django_filters.ChoiceFilter(choices=Suite.choices)
    status = django_filters.ChoiceFilter(choices=RunStatus.choices)
    collective = django_filters.ChoiceFilter(choices=Collective.choices)
    node = django_filters.CharFilter(field_name="nodes__hostname", distinct=True)

    class Meta:
        model = BenchmarkRun
        fields = ["suite", "status", "collective", "node"]
