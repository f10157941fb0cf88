from django.apps import AppConfig


class NodeexecConfig(AppConfig):
    name = "apps.nodeexec"
    label = "nodeexec"
