from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from drf_spectacular.views import SpectacularSwaggerView
from rest_framework.routers import DefaultRouter

from apps.accounts.forms import SignInForm
from apps.automation.api.urls import ROUTES as AUTOMATION_ROUTES
from apps.benchmarks.api.urls import ROUTES as BENCHMARK_ROUTES
from apps.core.schema import SchemaView
from apps.costs.api.urls import ROUTES as COST_ROUTES
from apps.deployments.api.urls import ROUTES as DEPLOYMENT_ROUTES
from apps.diagnosis.api.urls import ROUTES as DIAGNOSIS_ROUTES
from apps.discovery.api.urls import ROUTES as DISCOVERY_ROUTES
from apps.health.api.urls import ROUTES as HEALTH_ROUTES
from apps.inventory.api.urls import ROUTES as INVENTORY_ROUTES
from apps.jobs.api.urls import ROUTES as JOBS_ROUTES
from apps.monitoring import views as monitoring_views
from apps.monitoring.api.urls import ROUTES as MONITORING_ROUTES
from apps.remediation.api.urls import ROUTES as REMEDIATION_ROUTES
from apps.schedulers.api.urls import ROUTES as SCHEDULER_ROUTES
from apps.simulator.api.urls import ROUTES as SIMULATOR_ROUTES
from apps.topology.api.urls import ROUTES as TOPOLOGY_ROUTES
from apps.workloads.api.urls import ROUTES as WORKLOAD_ROUTES
from portal import (
    metrics,  # noqa: F401  (the feature apps' sources of /metrics)
    reports,  # noqa: F401  (business validation in the acceptance report)
)
from portal.staticfiles import favicon

# One API router for every app, and the only way the API is mounted: each app lists its (prefix, viewset) pairs,
# or (prefix, viewset, basename) for a viewset without a queryset, in api/urls.py.
router = DefaultRouter()
ROUTES = (
    (INVENTORY_ROUTES + TOPOLOGY_ROUTES + JOBS_ROUTES + SIMULATOR_ROUTES + DISCOVERY_ROUTES + DEPLOYMENT_ROUTES)
    + HEALTH_ROUTES
    + REMEDIATION_ROUTES
    + DIAGNOSIS_ROUTES
    + BENCHMARK_ROUTES
    + WORKLOAD_ROUTES
    + MONITORING_ROUTES
    + SCHEDULER_ROUTES
    + COST_ROUTES
    + AUTOMATION_ROUTES
)
for route in ROUTES:
    router.register(*route)

urlpatterns = [
    path("", include("apps.inventory.urls")),
    path("topology/", include("apps.topology.urls")),
    path("jobs/", include("apps.jobs.urls")),
    path("simulator/", include("apps.simulator.urls")),
    path("discovery/", include("apps.discovery.urls")),
    path("deployments/", include("apps.deployments.urls")),
    path("schedulers/", include("apps.schedulers.urls")),
    path("diagnosis/", include("apps.diagnosis.urls")),
    path("health/", include("apps.health.urls")),
    path("remediation/", include("apps.remediation.urls")),
    path("benchmarks/", include("apps.benchmarks.urls")),
    path("workloads/", include("apps.workloads.urls")),
    path("telemetry/", include("apps.monitoring.urls")),
    path("policies/", include("apps.costs.urls")),
    path("metrics", monitoring_views.metrics, name="metrics"),
    path("tokens/", include("apps.tokens.urls")),
    path("automation/", include("apps.automation.urls")),
    path("login/", auth_views.LoginView.as_view(authentication_form=SignInForm), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("api/schema/", SchemaView.as_view(), name="api-schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="api-schema"), name="api-docs"),
    # Namespaced, so API route names (node-list, job-detail) never shadow the pages of the same name.
    path("api/", include((router.urls, "api"))),
    path("admin/", admin.site.urls),
    path("favicon.ico", favicon, name="favicon"),
]

# JSON under /api/ (a path no route matches, a crash), branded pages elsewhere.
handler400 = "apps.core.errors.bad_request"
handler403 = "apps.core.errors.permission_denied"
handler404 = "apps.core.errors.page_not_found"
handler500 = "apps.core.errors.server_error"
