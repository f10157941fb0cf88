"""Role checks for the API: viewers read, operators also run jobs, admins change everything."""

from rest_framework.permissions import SAFE_METHODS, BasePermission

from apps.accounts.choices import Role


def role_required_for(request, view) -> str:
    if request.method in SAFE_METHODS:
        return Role.VIEWER
    # A view that starts work (jobs, checks) names the role it needs; inventory changes need an admin.
    return getattr(view, "write_role", Role.ADMIN)


def may_decide_host_keys(user) -> bool:
    """The one rule for trusting (or revoking) a node's SSH host key, on the node page as over the API: an admin's
    decision. A trusted key decides which machine the ssh transport runs commands on, as RACKPILOT_SSH_USER."""
    return bool(user and user.is_authenticated and user.is_active and user.has_role(Role.ADMIN))


class HostKeyPermission(BasePermission):
    """Host keys: viewers read; every change goes through may_decide_host_keys."""

    message = "Only an admin may decide which SSH host keys are trusted."

    def has_permission(self, request, view) -> bool:
        user = request.user
        if not (user and user.is_authenticated):
            return False
        if request.method in SAFE_METHODS:
            return user.has_role(Role.VIEWER)
        return may_decide_host_keys(user)


class RolePermission(BasePermission):
    message = "Your role does not allow this."

    def has_permission(self, request, view) -> bool:
        user = request.user
        if not (user and user.is_authenticated):
            return False
        return user.has_role(role_required_for(request, view))
