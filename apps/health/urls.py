from django.urls import path

from apps.health import views

urlpatterns = [
    path("reliability/", views.reliability, name="reliability"),
    path("events/<uuid:public_id>/clear/", views.clear_event, name="health-event-clear"),
]
