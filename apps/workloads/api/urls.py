from apps.workloads.api import views

ROUTES: list = [
    ("training-jobs", views.TrainingJobViewSet),
    ("inference-services", views.InferenceServiceViewSet),
]
