"""Role checks for the API: viewers read, operators also run jobs, admins change everything."""

from rest_framework.permissions import SAFE_METHODS, BasePermission

from apps.accounts.choices import Role


def role_required_for(request, view) -> str:
    if request.method in SAFE_METHODS:
        return Role.VIEWER
    # A view that starts work (jobs, checks) names the role it needs; inventory changes need an admin.
    return getattr(view, "write_role", Role.ADMIN)


class RolePermission(BasePermission):
    message = "Your role does not allow this."

    def has_permission(self, request, view) -> bool:
        user = request.user
        if not (user and user.is_authenticated):
            return False
        return user.has_role(role_required_for(request, view))
