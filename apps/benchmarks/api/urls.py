"""The benchmark viewsets, registered on the one API router in portal/urls.py."""

from apps.benchmarks.api.views import BenchmarkRunViewSet, MeasurementReferenceViewSet, ReferenceViewSet

ROUTES = [
    ("benchmark-references", ReferenceViewSet),
    ("benchmark-measurement-references", MeasurementReferenceViewSet),
    ("benchmarks", BenchmarkRunViewSet),
]
