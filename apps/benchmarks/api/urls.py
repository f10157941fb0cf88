"""The benchmark viewsets, registered on the one API router in portal/urls.py."""

from apps.benchmarks.api.views import (
    BenchmarkRunViewSet,
    MeasurementReferenceViewSet,
    ReferenceViewSet,
    TimelineAnalysisViewSet,
)

ROUTES = [
    ("benchmark-references", ReferenceViewSet),
    ("benchmark-measurement-references", MeasurementReferenceViewSet),
    ("benchmarks", BenchmarkRunViewSet),
    ("benchmark-timelines", TimelineAnalysisViewSet),
]
