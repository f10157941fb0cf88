from django.db import models


class AuditAction(models.TextChoices):
    CREATE = "create", "Created"
    UPDATE = "update", "Updated"
    DELETE = "delete", "Deleted"


class ChangeSource(models.TextChoices):
    UI = "ui", "Web UI"
    API = "api", "REST API"
    IMPORT = "import", "Import"
    COMMAND = "command", "Command line"
    SYSTEM = "system", "System"
