"""python manage.py sim fault inject|clear|list ..., sim reset NODE (forget command-made changes) and
sim exec NODE -- ARGV..."""

import argparse
import json
import sys

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from rest_framework import serializers

from apps.core.audit import audit_context
from apps.core.choices import ChangeSource
from apps.core.forms import flat_messages
from apps.inventory.models import Node
from apps.simulator import services
from apps.simulator.digits import integer
from apps.simulator.faults.kinds import FAULT_KINDS
from apps.simulator.models import SimFault


class Command(BaseCommand):
    help = "The simulated cluster: inject, clear and list faults; forget changes; run a command on a simulated node."

    def add_arguments(self, parser):
        actions = parser.add_subparsers(dest="action", required=True)
        fault = actions.add_parser("fault", help="Inject, clear or list faults.")
        fault_actions = fault.add_subparsers(dest="fault_action", required=True)
        inject = fault_actions.add_parser("inject", help="Give a node a fault.")
        inject.add_argument("node", help="Host name.")
        inject.add_argument("kind", choices=list(FAULT_KINDS))
        inject.add_argument("--target", default="", help="GPU index, NIC, priority, mount point or file.")
        inject.add_argument("--param", action="append", default=[], metavar="NAME=N", help="e.g. --param mtu=1500")
        inject.add_argument("--user", metavar="USERNAME", help="Record the fault as this user's.")
        clear = fault_actions.add_parser("clear", help="Remove a node's faults (of one kind, or all).")
        clear.add_argument("node")
        clear.add_argument("kind", nargs="?", choices=list(FAULT_KINDS))
        listing = fault_actions.add_parser("list", help="List faults.")
        listing.add_argument("--json", action="store_true")
        reset = actions.add_parser("reset", help="Forget the changes commands made on a node.")
        reset.add_argument("node")
        run = actions.add_parser("exec", help="Print what a simulated node answers; exits with its exit code.")
        run.add_argument("node")
        run.add_argument("argv", nargs=argparse.REMAINDER, help="The command, after --.")
        run.add_argument("--seed", type=int, default=0)
        run.add_argument("--load", type=float, default=0.0, help="GPU load from 0 (idle) to 1 (a GEMM loop).")

    def handle(self, *args, **options):
        if options["action"] == "exec":
            return self._exec(options)
        if options["action"] == "reset":
            removed = services.clear_changes(node=self._node(options["node"]))
            self.stdout.write(f"Forgot {removed} change{'s' if removed != 1 else ''} on {options['node']}.")
            return None
        action = options["fault_action"]
        with audit_context(source=ChangeSource.COMMAND, user=self._user(options.get("user"))):
            if action == "inject":
                self._inject(options)
            elif action == "clear":
                removed = services.clear_faults(node=self._node(options["node"]), kind=options["kind"])
                self.stdout.write(f"Cleared {removed} fault{'s' if removed != 1 else ''} on {options['node']}.")
            else:
                self._list(options)

    def _node(self, hostname: str) -> Node:
        try:
            return Node.objects.get(hostname=hostname)
        except Node.DoesNotExist:
            raise CommandError(f"No node named {hostname!r}.") from None

    def _user(self, username):
        if not username:
            return None
        try:
            return get_user_model().objects.get(username=username)
        except get_user_model().DoesNotExist:
            raise CommandError(f"No user named {username!r}.") from None

    def _inject(self, options) -> None:
        parameters = {}
        for item in options["param"]:
            name, _, value = item.partition("=")
            try:
                parameters[name] = integer(value)
            except ValueError:
                raise CommandError(f"--param {item}: give NAME=NUMBER, e.g. mtu=1500.") from None
        try:
            fault = services.inject_fault(
                node=self._node(options["node"]),
                kind=options["kind"],
                target=options["target"],
                parameters=parameters,
                user=self._user(options.get("user")),
            )
        except serializers.ValidationError as error:
            raise CommandError("; ".join(map(str, flat_messages(error.detail)))) from None
        self.stdout.write(f"{fault.summary} injected.")

    def _list(self, options) -> None:
        faults = SimFault.objects.select_related("node").order_by("node__hostname", "kind", "target")
        if options["json"]:
            rows = [
                {
                    "id": str(f.public_id),
                    "node": f.node.hostname,
                    "kind": f.kind,
                    "target": f.target,
                    "parameters": f.parameters,
                }
                for f in faults
            ]
            self.stdout.write(json.dumps(rows, indent=2))
            return
        if not faults:
            self.stdout.write("No faults.")
        for fault in faults:
            self.stdout.write(f"{fault.summary}\t({fault.kind})")

    def _exec(self, options) -> None:
        argv = options["argv"]
        if argv[:1] == ["--"]:
            argv = argv[1:]
        if not argv:
            raise CommandError("Give the command after --, e.g. sim exec gpu001 -- nvidia-smi -L")
        result = services.run_command(
            node=self._node(options["node"]), argv=argv, seed=options["seed"], load=options["load"]
        )
        self.stdout.write(result.stdout, ending="")
        self.stderr.write(result.stderr, ending="")
        self.stdout.flush()
        if result.exit_code:
            sys.exit(result.exit_code)
