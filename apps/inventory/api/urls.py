"""The inventory's viewsets, registered on the one API router in portal/urls.py."""

ROUTES: list = []
