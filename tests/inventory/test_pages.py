"""The inventory pages as an operator uses them."""

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from apps.core.models import AuditEntry
from apps.inventory.models import Node

pytestmark = pytest.mark.django_db

PAGES = ["/", "/nodes/", "/racks/", "/audit/", "/inventory/transfer/"]


@pytest.mark.parametrize("url", PAGES)
def test_anonymous_users_are_sent_to_log_in(client, url):
    response = client.get(url)
    assert response.status_code == 302
    assert response["Location"].startswith("/login/")


def test_dashboard_counts_nodes_and_gpus(browser_as, viewer, demo_cluster):
    page = browser_as(viewer).get("/")
    assert page.status_code == 200
    tallies = {t.value: t.count for t in page.context["nodes_by_status"]}
    assert tallies["ready"] == 27 and tallies["racked"] == 8
    assert {t.value: t.count for t in page.context["gpus_by_health"]}["healthy"] == 256
    assert b"Topology rules" in page.content


def test_node_list_filters_and_searches(browser_as, viewer, demo_cluster):
    client = browser_as(viewer)
    racked = client.get("/nodes/", {"status": "racked"})
    assert racked.context["paginator"].count == 8
    found = client.get("/nodes/", {"q": "gpu017"})
    assert [node.hostname for node in found.context["object_list"]] == ["gpu017"]


def test_node_detail_shows_gpus_nics_firmware_and_links(
    browser_as, viewer, demo_cluster, django_assert_max_num_queries
):
    node = Node.objects.get(hostname="gpu017")
    client = browser_as(viewer)
    # A fixed number whatever the node holds: its parts, links, scheduler view and health events (one query each),
    # and the History section's six reads (events, decisions, drains, repairs, parts, validations).
    with django_assert_max_num_queries(33):
        page = client.get(f"/nodes/{node.public_id}/")
    body = page.content.decode()
    assert page.status_code == 200
    assert "2.3.5" in body  # the BIOS left behind
    assert "leaf-r03-a:swp" in body  # where ens1np0 is cabled
    assert body.count("H200 SXM") >= 8


def test_rack_elevation_draws_every_node(browser_as, viewer, demo_cluster):
    page = browser_as(viewer).get("/racks/elevations/")
    body = page.content.decode()
    assert all(f"gpu{n:03d}" in body for n in range(1, 33))
    assert "mgmt01" in body


def test_the_racks_list_draws_its_own_pages_elevations_when_scrolled_to(browser_as, viewer, demo_cluster):
    client = browser_as(viewer)
    listed = client.get("/racks/", {"name": "r02", "sort": "-name"}).content.decode()
    assert "gpu009" not in listed  # the table alone: the drawings come on demand
    assert 'hx-get="/racks/elevations/?name=r02&amp;sort=-name&amp;page=1" hx-trigger="revealed"' in listed

    drawn = client.get("/racks/elevations/", {"name": "r02", "sort": "-name", "page": 1}, HTTP_HX_REQUEST="true")
    body = drawn.content.decode()
    assert drawn.status_code == 200 and body.lstrip().startswith('<div class="racks" id="rack-elevations">')
    assert "gpu009" in body and "gpu001" not in body  # r02's nodes only, as the list filtered them
    whole = client.get("/racks/elevations/", {"name": "nosuchrack"})
    assert whole.status_code == 200 and "<h1>Rack elevations</h1>" in whole.content.decode()


def test_viewer_cannot_edit_a_node(browser_as, viewer, demo_cluster):
    node = Node.objects.get(hostname="gpu001")
    response = browser_as(viewer).post(f"/nodes/{node.public_id}/edit/", {"hostname": "renamed"})
    assert response.status_code == 403
    assert Node.objects.filter(hostname="gpu001").exists()


def test_edit_form_refuses_an_occupied_position_and_changes_nothing(browser_as, admin, demo_cluster):
    node = Node.objects.get(hostname="gpu002")
    neighbour = Node.objects.get(hostname="gpu001")
    form = _form_data(node, u_position=neighbour.u_position)
    page = browser_as(admin).post(f"/nodes/{node.public_id}/edit/", form)
    assert page.status_code == 200
    assert "u_position" in page.context["form"].errors
    node.refresh_from_db()
    assert node.u_position != neighbour.u_position


def test_edit_by_an_admin_is_audited_as_a_ui_change(browser_as, admin, demo_cluster):
    node = Node.objects.get(hostname="gpu002")
    response = browser_as(admin).post(f"/nodes/{node.public_id}/edit/", _form_data(node, status="degraded"))
    assert response.status_code == 302
    entry = AuditEntry.objects.for_object(node).first()
    assert (entry.actor, entry.source, entry.action) == (admin, "ui", "update")
    assert entry.changes == {"status": ["ready", "degraded"]}
    audit_page = browser_as(admin).get("/audit/", {"source": "ui"})
    assert "gpu002" in audit_page.content.decode()


def _form_data(node, **changes):
    data = {
        "hostname": node.hostname,
        "role": node.role,
        "status": node.status,
        "rack": node.rack_id,
        "u_position": node.u_position,
        "u_height": node.u_height,
        "management_ip": node.management_ip,
        "ssh_port": node.ssh_port,
        "transport": node.transport,
        "bmc_address": node.bmc_address,
        "gpu_sku": node.gpu_sku_id,
        "expected_gpu_count": node.expected_gpu_count,
        "numa_nodes": node.numa_nodes,
        "tags": [tag.pk for tag in node.tags.all()],
        "comments": node.comments,
    }
    data.update(changes)
    return data


def test_import_page_lists_every_bad_row_and_imports_nothing(browser_as, admin, demo_cluster):
    csv_text = (
        "hostname,role,status,site,rack,u_position,u_height,management_ip\n"
        "new001,compute,planned,demo-dc,r01,3,4,10.99.0.1\n"
        "new002,compute,planned,demo-dc,no-such-rack,,1,10.99.0.2\n"
        "new003,compute,planned,demo-dc,r02,,1,not-an-ip\n"
    )
    before = Node.objects.count()
    upload = SimpleUploadedFile("nodes.csv", csv_text.encode(), content_type="text/csv")
    page = browser_as(admin).post("/inventory/transfer/", {"file": upload, "fmt": ""})
    assert page.status_code == 200
    lines = sorted(problem.line for problem in page.context["problems"])
    assert lines == [2, 3, 4]
    assert "Nothing was imported" in page.content.decode()
    assert Node.objects.count() == before


def test_import_page_imports_a_good_file(browser_as, admin, demo_cluster):
    csv_text = "hostname,role,status\nspare001,compute,planned\n"
    upload = SimpleUploadedFile("nodes.csv", csv_text.encode(), content_type="text/csv")
    response = browser_as(admin).post("/inventory/transfer/", {"file": upload, "fmt": ""}, follow=True)
    assert "Imported nodes.csv: 1 created" in response.content.decode()
    assert AuditEntry.objects.filter(object_repr="spare001", source="import", actor=admin).exists()


def test_viewer_cannot_import(browser_as, viewer, demo_cluster):
    upload = SimpleUploadedFile("nodes.csv", b"hostname,role,status\nspare002,compute,planned\n")
    browser_as(viewer).post("/inventory/transfer/", {"file": upload})
    assert not Node.objects.filter(hostname="spare002").exists()


def test_a_short_row_names_no_field_rather_than_none(browser_as, admin, demo_cluster):
    csv_text = "hostname,role,status,site,rack\nnew004,compute,planned\n"
    upload = SimpleUploadedFile("nodes.csv", csv_text.encode(), content_type="text/csv")
    text = browser_as(admin).post("/inventory/transfer/", {"file": upload, "fmt": ""}).content.decode()
    table = text[text.index('id="import-problems"') : text.index("</table>")]
    assert "3 values for 5 columns." in table
    assert "None" not in table
    assert "<td>2</td>" in table  # the line of the short row


@pytest.mark.parametrize(("params", "field"), [({"rack": "nosuchrack"}, "rack"), ({"gpu_sku": "H200"}, "gpu_sku")])
def test_a_filter_that_matches_nothing_shows_its_error_and_no_rows(browser_as, viewer, demo_cluster, params, field):
    page = browser_as(viewer).get("/nodes/", params)
    assert page.status_code == 200
    assert field in page.context["filter"].errors
    assert list(page.context["object_list"]) == []
    assert b"No node matches these filters." in page.content
    assert b"gpu001" not in page.content
