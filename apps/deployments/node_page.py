"""The node page's sections from this app (registered from DeploymentsConfig.ready): telling the scheduler about the
node's drain state, and rebooting it. Each shows the exact commands before anything runs."""

from apps.accounts.choices import Role
from apps.deployments import node_operations
from apps.deployments.forms import RebootForm
from apps.deployments.kinds.reboot import KIND as REBOOT_KIND
from apps.deployments.kinds.reboot import RebootKind, reboot_plan
from apps.jobs.models import Job
from apps.schedulers.models import SchedulerNodeState
from apps.schedulers.services import differences_of


def scheduler_section(node, request) -> dict:
    """The commands that match the node's drain state, where they run, the last such job, and what the scheduler
    itself last said about the node (its state and reason, and how that differs from the inventory)."""
    last = Job.objects.filter(kind=node_operations.KIND, parameters__node=node.hostname).order_by("-created").first()
    view = SchedulerNodeState.objects.filter(node=node).first()
    if view is not None:
        view.node = node  # the page's own node: no second query for it
    return {
        "node": node,
        "planned": node_operations.scheduler_request(node),
        "last": last,
        "view": view,
        "differences": differences_of(view) if view is not None else [],
    }


def reboot_section(node, request) -> dict:
    """The reboot's exact commands, the form for operators, and the node's last reboot job."""
    return {
        "node": node,
        "plan": reboot_plan(RebootKind.validate({})),
        "may_reboot": request.user.has_role(Role.OPERATOR),
        "form": RebootForm(),
        "last_reboot": Job.objects.filter(kind=REBOOT_KIND, nodes=node).order_by("-created").first(),
    }
