"""The project's schema class (REST_FRAMEWORK's DEFAULT_SCHEMA_CLASS). Kept apart from apps.core.schema, whose
view imports drf_spectacular.views, which reads this setting while it loads."""

from drf_spectacular.openapi import AutoSchema as SpectacularAutoSchema


def paginated(action):
    """Marks an extra action that pages its answer (paginate_queryset): the schema documents the page object."""
    action.paginates = True
    return action


class AutoSchema(SpectacularAutoSchema):
    """A list is documented as a page (count, next, results) only where the view pages it: the `list` action and
    extra actions marked @paginated. Other actions answering many rows answer a plain array."""

    def _get_paginator(self):
        action = getattr(self.view, "action", None)
        if action not in (None, "list") and not getattr(getattr(self.view, action, None), "paginates", False):
            return None
        return super()._get_paginator()
