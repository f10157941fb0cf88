"""`make run`: prepare the database, the demo cluster, an admin account and the static files, then serve the portal
(embedded wiring)."""

import secrets

import uvicorn
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand

from apps.accounts.choices import Role
from apps.inventory.models import Node

ADMIN_USERNAME = "admin"


class Command(BaseCommand):
    help = (
        "Migrate, load the demo cluster into an empty database, create an admin account, collect the static files, "
        "and serve the portal."
    )

    def add_arguments(self, parser):
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument("--no-demo", action="store_true", help="Do not load the demo cluster.")

    def handle(self, *args, host, port, no_demo, **options):
        call_command("migrate", interactive=False, verbosity=0)
        if not no_demo and not Node.objects.exists():
            self.load_demo()
        self._ensure_admin()
        # Hashed, compressed copies of the static files (Plotly's 4.8 MB script goes out as 1.5 MB, cached for good).
        self.stdout.write(f"Collecting static files into {settings.STATIC_ROOT} …")
        call_command("collectstatic", interactive=False, verbosity=0)
        if settings.EMBEDDED:
            from portal.embedded import start_embedded_worker

            start_embedded_worker()
            self.stdout.write("Embedded wiring: SQLite, an in-process Celery worker and channel layer.")
        self.stdout.write(f"Rackpilot is at http://{host}:{port}/ — Ctrl-C stops it.")
        # No per-message deflate: see docs/jobs.md, "Live events at scale".
        uvicorn.run(
            "portal.asgi:application",
            host=host,
            port=port,
            log_level="info",
            lifespan="off",
            ws_per_message_deflate=False,
        )

    def load_demo(self) -> None:
        call_command("load_demo", stdout=self.stdout)
        call_command("load_demo_workloads", stdout=self.stdout)  # the inventory's demo cannot import workloads
        call_command("load_demo_slos", stdout=self.stdout)  # nor the workloads' demo monitoring
        if settings.RACKPILOT_JOB_DEFAULT_TRANSPORT == "sim":
            # The simulated BMCs' login: the BMC readings, the event log and power through the BMC work on the demo.
            call_command("sim_bmcs", stdout=self.stdout)

    def _ensure_admin(self) -> None:
        password_file = settings.VAR_DIR / "admin-password.txt"
        User = get_user_model()
        if User.objects.filter(username=ADMIN_USERNAME).exists():
            if password_file.exists():
                self.stdout.write(f"Log in as '{ADMIN_USERNAME}'; the password is in {password_file}")
            return
        password = secrets.token_urlsafe(12)
        User.objects.create_superuser(ADMIN_USERNAME, email="", password=password, role=Role.ADMIN)
        settings.VAR_DIR.mkdir(parents=True, exist_ok=True)
        password_file.write_text(password + "\n")
        password_file.chmod(0o600)
        self.stdout.write(f"Created the account '{ADMIN_USERNAME}'; its generated password is in {password_file}")
