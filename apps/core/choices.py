from django.db import models


class AuditAction(models.TextChoices):
    CREATE = "create", "Created"
    UPDATE = "update", "Updated"
    DELETE = "delete", "Deleted"
    # Actions, not changes of a row's fields: what someone did.
    START = "start", "Started"
    CANCEL = "cancel", "Cancel requested"
    APPROVE = "approve", "Approved"
    DISMISS = "dismiss", "Dismissed"
    CLEAR = "clear", "Cleared"
    TEST = "test", "Test sent"
    TEST_DELIVERED = "test_delivered", "Test delivered"
    TEST_FAILED = "test_failed", "Test failed"
    LOGIN = "login", "Logged in"
    LOGOUT = "logout", "Logged out"
    LOGIN_FAILED = "login_failed", "Failed login"
    LOCK = "lock", "Sign-in locked"
    UNLOCK = "unlock", "Sign-in lock lifted"


class ChangeSource(models.TextChoices):
    UI = "ui", "Web UI"
    API = "api", "REST API"
    IMPORT = "import", "Import"
    COMMAND = "command", "Command line"
    JOB = "job", "Job"
    SYSTEM = "system", "System"


class Transport(models.TextChoices):
    """How commands reach a node (apps.nodeexec.transports): named here, below the apps that record one."""

    SSH = "ssh", "ssh"
    LOCAL = "local", "local"
    SIM = "sim", "sim"
