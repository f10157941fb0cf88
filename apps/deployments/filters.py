"""Deployment filters: one set per list, shared by the deployment list page and the API's viewsets."""

import django_filters

from apps.core.filters import FilterSet
from apps.core.listing import Column
from apps.deployments.choices import DeploymentState
from apps.deployments.models import AcceptanceCriterion, Deployment, Suggestion


class DeploymentFilterSet(FilterSet):
    state = django_filters.ChoiceFilter(choices=DeploymentState.choices)

    class Meta:
        model = Deployment
        fields = ["name", "state"]


def latest_run(deployment):
    """The deployment's newest run, from its prefetched runs."""
    return max(deployment.runs.all(), key=lambda run: run.number, default=None)


def _latest_run_cell(deployment) -> str:
    run = latest_run(deployment)
    return f"run {run.number} {run.job.get_status_display().lower()}" if run else ""


# The deployment list's columns (deployments annotated with `node_count`, runs and their jobs prefetched), and
# GET /api/deployments/'s `ordering` fields.
DEPLOYMENT_COLUMNS = (
    Column("name", "Name", lambda deployment: deployment.name),
    Column("state", "State", lambda deployment: deployment.get_state_display()),
    Column("nodes", "Nodes", lambda deployment: deployment.node_count, order="node_count"),
    Column("latest_run", "Latest run", _latest_run_cell, order=None),
    Column("created", "Created", lambda deployment: deployment.created.isoformat()),
    Column(
        "created_by",
        "Created by",
        lambda deployment: deployment.created_by.username if deployment.created_by else "",
        order="created_by__username",
    ),
)


class SuggestionFilterSet(FilterSet):
    class Meta:
        model = Suggestion
        fields = ["state", "hostname", "step", "problem", "deployment__public_id"]


class AcceptanceCriterionFilterSet(FilterSet):
    class Meta:
        model = AcceptanceCriterion
        fields = ["check_name", "sku__name"]
