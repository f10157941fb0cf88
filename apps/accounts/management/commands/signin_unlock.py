"""manage.py signin_unlock NAME_OR_ADDRESS [...]: lift the sign-in locks of account names or addresses (audited);
--list shows the active ones."""

from django.core.management.base import BaseCommand
from django.utils import timezone

from apps.accounts import lockout
from apps.accounts.models import SignInLock
from apps.core.audit import audit_context
from apps.core.choices import ChangeSource
from apps.core.text import counted


class Command(BaseCommand):
    help = "Lift the sign-in lockout of account names or client addresses (or list the active locks)."

    def add_arguments(self, parser):
        parser.add_argument("keys", nargs="*", help="Account names or addresses whose locks to lift.")
        parser.add_argument("--list", action="store_true", help="List the active locks.")

    def handle(self, *args, keys, list, **options):
        if list or not keys:
            for lock in SignInLock.objects.active(timezone.now()).order_by("locked_until"):
                self.stdout.write(f"{lock.scope}\t{lock.key}\tuntil {lock.locked_until.isoformat()}")
            return
        with audit_context(source=ChangeSource.COMMAND):
            for key in keys:
                lifted = lockout.lift_for(key=key)
                self.stdout.write(f"{key}: {counted(lifted, 'lock')} lifted" if lifted else f"{key}: no active lock")
