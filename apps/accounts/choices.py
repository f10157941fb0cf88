from django.db import models


class Role(models.TextChoices):
    """What a user may do. Each role includes the ones before it."""

    VIEWER = "viewer", "Viewer"
    OPERATOR = "operator", "Operator"
    ADMIN = "admin", "Admin"


ROLE_RANK = {Role.VIEWER: 0, Role.OPERATOR: 1, Role.ADMIN: 2}
