from django.urls import path

from apps.inventory import views

urlpatterns = [
    path("", views.dashboard, name="dashboard"),
    path("nodes/", views.node_list, name="node-list"),
    path("nodes/bulk/", views.node_bulk, name="node-bulk"),
    path("nodes/<uuid:public_id>/drain/", views.node_drain, name="node-drain"),
    path("nodes/<uuid:public_id>/undrain/", views.node_undrain, name="node-undrain"),
    path("nodes/<uuid:public_id>/", views.node_detail, name="node-detail"),
    path("nodes/<uuid:public_id>/edit/", views.node_edit, name="node-edit"),
    path("nodes/<uuid:public_id>/host-keys/<uuid:key_id>/trust/", views.trust_host_key, name="node-trust-key"),
    path("nodes/<uuid:public_id>/nics/<str:nic_name>/trace/", views.nic_trace, name="nic-trace"),
    path("racks/", views.rack_list, name="rack-list"),
    path("racks/elevations/", views.rack_elevations, name="rack-elevations"),
    path("switches/", views.switch_list, name="switch-list"),
    path("switches/<uuid:public_id>/", views.switch_detail, name="switch-detail"),
    path("racks/<uuid:public_id>/", views.rack_detail, name="rack-detail"),
    # Under racks/: the top bar's Racks item stays the one highlighted on a PDU's pages.
    path("racks/pdus/", views.pdu_list, name="pdu-list"),
    path("racks/pdus/<uuid:public_id>/", views.pdu_detail, name="pdu-detail"),
    path("inventory/transfer/", views.transfer_page, name="inventory-transfer"),
    path("audit/", views.audit_log, name="audit-log"),
    path("audit/export.csv", views.audit_export, {"fmt": "csv"}, name="audit-export-csv"),
    path("audit/export.json", views.audit_export, {"fmt": "json"}, name="audit-export-json"),
]
