"""Import and export of the whole inventory over the API (mounted at /api/inventory/)."""

urlpatterns: list = []
