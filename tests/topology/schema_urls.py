"""Just the topology API, so its OpenAPI schema can be generated (and checked for warnings) on its own."""

from django.urls import include, path
from rest_framework.routers import SimpleRouter

from apps.topology.api.urls import ROUTES

router = SimpleRouter()
for route in ROUTES:
    router.register(*route)
urlpatterns = [path("api/", include(router.urls))]
