"""Every filter of every list endpoint under /api/ takes any text: a `%` in it is a value, never a format string."""

import pytest
from django.urls import reverse

from portal.urls import router

HOSTILE = ["%", "%s", "%(x)s", "%d%%"]


def _list_filters():
    for prefix, viewset, basename in router.registry:
        filterset = getattr(viewset, "filterset_class", None)
        if filterset is None or not hasattr(viewset, "list"):
            continue
        for name in filterset.base_filters:
            yield pytest.param(basename, name, id=f"{prefix}?{name}")


FILTERS = list(_list_filters())


def test_the_walk_finds_the_reference_filters():
    assert len(FILTERS) > 20
    assert any(param.values == ("node", "rack") for param in FILTERS)


@pytest.mark.django_db
@pytest.mark.parametrize(("basename", "name"), FILTERS)
def test_percent_signs_in_a_filter_value_never_give_a_server_error(basename, name, api_as, viewer):
    client = api_as(viewer)
    url = reverse(f"api:{basename}-list")
    for value in HOSTILE:
        response = client.get(url, {name: value})
        assert response.status_code in (200, 400), (name, value, response.status_code)
        if response.status_code == 400:
            assert name in response.json(), response.json()
