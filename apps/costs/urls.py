from django.urls import path

from apps.costs import views

# Mounted at /policies/ by portal/urls.py (the pages kept their addresses when the policies left apps/monitoring).
urlpatterns = [
    path("", views.policy_list, name="policy-list"),
    path("<uuid:public_id>/", views.policy_detail, name="policy-detail"),
    path("<uuid:public_id>/<slug:step>/", views.policy_step, name="policy-step"),
    path("<uuid:public_id>/actions/<uuid:action_id>/<slug:name>/", views.policy_artefact, name="policy-artefact"),
]
