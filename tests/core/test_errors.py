"""Errors Django answers before or after DRF: JSON under /api/, branded pages elsewhere — never Django's bare HTML."""

import pytest


@pytest.mark.django_db
@pytest.mark.parametrize("path", ["/api/nodes/not-a-uuid/", "/api/no-such-endpoint/", "/api/deployments/x/plan/"])
def test_an_api_path_that_matches_nothing_answers_json(api_as, viewer, path):
    response = api_as(viewer).get(path)
    assert response.status_code == 404
    assert response["Content-Type"] == "application/json"
    assert response.json() == {"detail": "Not found."}


@pytest.mark.django_db
def test_a_page_that_does_not_exist_is_a_branded_404(browser_as, viewer):
    response = browser_as(viewer).get("/no/such/page/")
    assert response.status_code == 404
    text = response.content.decode()
    assert "404 · Not found" in text and "Back to the dashboard" in text and 'class="topbar"' in text


def test_a_crash_under_api_answers_json_and_a_page_crash_a_plain_branded_page(rf):
    from apps.core.errors import server_error

    api = server_error(rf.get("/api/nodes/"))
    assert api.status_code == 500 and api["Content-Type"] == "application/json"
    page = server_error(rf.get("/nodes/"))
    assert page.status_code == 500 and b"500 \xc2\xb7 Server error" in page.content


@pytest.mark.django_db
def test_a_bad_query_parameter_answers_an_object_naming_what_is_wrong(api_as, viewer):
    response = api_as(viewer).get("/api/discovery/differences/", {"search": "gpu\x00"})
    assert response.status_code == 400
    assert response.json() == {"non_field_errors": ["Null characters are not allowed."]}


@pytest.mark.django_db
def test_huge_limit_and_offset_are_answers_not_database_errors(api_as, viewer):
    client = api_as(viewer)
    for name in ("limit", "offset"):  # past what a database holds: a 400 naming the parameter, as the schema says
        response = client.get("/api/switches/", {name: 10**30})
        assert response.status_code == 400 and name in response.json()


@pytest.mark.django_db
def test_a_reference_by_a_name_with_a_nul_is_a_field_error(api_as, admin):
    """PostgreSQL cannot be asked for a string with a NUL: the field says no match before any query."""
    response = api_as(admin).post("/api/racks/", {"name": "r99", "site": "l{\x00M"}, format="json")
    assert response.status_code == 400
    assert response.json()["site"] == ["No site matches 'l{\\x00M'."]


@pytest.mark.django_db
def test_a_value_the_database_cannot_hold_is_a_400(api_as, admin, demo_cluster):
    response = api_as(admin).post("/api/sim/faults/", {"kind": "pfc_off", "node": "gpu\x00001"}, format="json")
    assert response.status_code == 400, response.content[:300]
