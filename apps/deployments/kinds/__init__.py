"""The deployments app's job kinds: `deploy` (a deployment's plan, deploy.py), `reboot` (reboot.py),
`scheduler-action` (drain or undrain a node in the scheduler, scheduler_action.py) and `gpu-reset` (reset one GPU of
a drained node, gpu_reset.py). Importing this package registers them (DeploymentsConfig.ready)."""

from apps.deployments.kinds import deploy, gpu_reset, reboot, scheduler_action  # noqa: F401
