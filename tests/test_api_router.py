"""The API is mounted one way: one DRF router in portal/urls.py, each app's viewsets registered on it."""

from django.urls import reverse

from portal import urls


def test_every_api_endpoint_but_the_schema_comes_from_the_one_router():
    mounted = [str(pattern.pattern) for pattern in urls.urlpatterns if str(pattern.pattern).startswith("api/")]
    assert mounted == ["api/schema/", "api/docs/", "api/"]
    assert {"nodes", "jobs", "topology", "inventory"} <= {prefix for prefix, *_ in urls.router.registry}


def test_the_endpoints_keep_their_urls():
    assert reverse("api:topology-list") == "/api/topology/"
    assert reverse("api:topology-rules") == "/api/topology/rules/"
    assert reverse("api:inventory-export") == "/api/inventory/export/"
    assert reverse("api:inventory-import") == "/api/inventory/import/"
    assert reverse("api:node-list") == "/api/nodes/"
