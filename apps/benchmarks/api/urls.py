"""The benchmark viewsets, registered on the one API router in portal/urls.py."""

from apps.benchmarks.api.views import BenchmarkRunViewSet, ReferenceViewSet

ROUTES = [("benchmark-references", ReferenceViewSet), ("benchmarks", BenchmarkRunViewSet)]
