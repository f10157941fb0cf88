from django.contrib.auth.models import AbstractUser
from django.db import models

from apps.accounts.choices import ROLE_RANK, Role


class User(AbstractUser):
    """A person or automation account. The role decides what it may do: read, run jobs, or change everything."""

    role = models.CharField(max_length=16, choices=Role.choices, default=Role.VIEWER)

    class Meta:
        ordering = ["username"]

    def has_role(self, role: str) -> bool:
        if self.is_superuser:
            return True
        return ROLE_RANK[Role(self.role)] >= ROLE_RANK[Role(role)]

    @property
    def is_operator(self) -> bool:
        return self.has_role(Role.OPERATOR)

    @property
    def is_admin_role(self) -> bool:
        return self.has_role(Role.ADMIN)
