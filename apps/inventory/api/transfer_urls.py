"""Import and export of the whole inventory over the API (mounted at /api/inventory/)."""

from django.urls import path

from apps.inventory.api.transfer_views import InventoryExportView, InventoryImportView

urlpatterns = [
    path("export/", InventoryExportView.as_view(), name="inventory-export"),
    path("import/", InventoryImportView.as_view(), name="inventory-import"),
]
