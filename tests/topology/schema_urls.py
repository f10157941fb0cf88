"""Just the topology API, so its OpenAPI schema can be generated (and checked for warnings) on its own."""

from django.urls import include, path

urlpatterns = [path("api/topology/", include("apps.topology.api.urls"))]
