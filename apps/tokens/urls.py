from django.urls import path

from apps.tokens import views

urlpatterns = [
    path("", views.token_list, name="api-tokens"),
    path("new/", views.token_create, name="api-token-create"),
    path("<uuid:public_id>/revoke/", views.token_revoke, name="api-token-revoke"),
]
