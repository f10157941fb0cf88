from django.apps import AppConfig


class TopologyConfig(AppConfig):
    name = "apps.topology"
    label = "topology"
