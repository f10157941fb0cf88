"""The deployments app's job kinds: `deploy` (a deployment's plan, deploy.py), `reboot` (reboot.py) and
`scheduler-action` (drain or undrain a node in the scheduler, scheduler_action.py). Importing this package registers
them (DeploymentsConfig.ready)."""

from apps.deployments.kinds import deploy, reboot, scheduler_action  # noqa: F401
