from django.apps import AppConfig


class RemediationConfig(AppConfig):
    name = "apps.remediation"
    label = "remediation"
    verbose_name = "Remediation"

    def ready(self) -> None:
        from apps.benchmarks.signals import run_finished
        from apps.deployments.signals import scheduler_action_finished
        from apps.inventory.sections import NODE_PAGE, RACK_PAGE
        from apps.inventory.services import register_undrain_guard
        from apps.remediation import history, kinds, panels, repairs  # noqa: F401  (kinds registers repair-evidence)

        # The rack page's first section: its open leak and coolant events (apps/inventory/sections.py).
        RACK_PAGE.register(
            name="coolant", template="remediation/partials/rack_coolant.html", context=panels.rack_coolant, first=True
        )
        # A repair's validation waits on its benchmark runs; a node in repair returns through it, not by hand.
        run_finished.connect(_run_finished, dispatch_uid="remediation-repair-gate")
        # A return to service waits for the scheduler's resume: the repair is returned only once it succeeded.
        scheduler_action_finished.connect(_resume_finished, dispatch_uid="remediation-repair-return")
        register_undrain_guard(repairs.undrain_refusal)
        NODE_PAGE.register(name="history", template="remediation/partials/node_history.html", context=history.section)


def _run_finished(sender, run, **kwargs):
    from apps.remediation import repairs

    repairs.run_finished(run=run)


def _resume_finished(sender, job, **kwargs):
    from apps.remediation import repairs

    repairs.resume_finished(job=job)
