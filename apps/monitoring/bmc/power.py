"""Power actions through a node's BMC (out of band: a node that no longer answers ssh can still be cycled): the
flows over IPMI and Redfish, and starting the `bmc-power` job (the kind: apps/monitoring/kinds/bmc_power.py).

IPMI: `ipmitool ... chassis power on|off|cycle|reset`, then `chassis power status`. Redfish: POST the System's
`ComputerSystem.Reset` with a ResetType the system allows (`ResetType@Redfish.AllowableValues`), then its
`PowerState`. Either way the step succeeds only when the read-back agrees with what the action leaves (on, or off);
BMCs take a few seconds to act, so the read-back is repeated for up to READBACK_SECONDS. Logins, secrets and
transports are the BMC reads' (apps/monitoring/bmc/clients.py)."""

import asyncio
from dataclasses import dataclass

from rest_framework import serializers

from apps.core import audit
from apps.core.choices import AuditAction
from apps.core.outbound import OutboundRefused, check_target
from apps.jobs.models import Job
from apps.jobs.services import TargetSpec, create_job
from apps.monitoring.bmc.clients import (
    PROBE,
    BmcFailure,
    IpmiRun,
    RedfishReader,
    RedfishSend,
    _command_block,
    _ipmi_failure,
)
from apps.monitoring.bmc.logins import BmcLogin
from apps.monitoring.choices import BmcProtocol, PollResult
from apps.monitoring.models import Bmc
from apps.nodeexec.bmc import DESTRUCTIVE_ACTIONS, POWER_ACTIONS, POWER_AFTER, POWER_KIND
from apps.parsers.errors import ParseError
from apps.parsers.ipmi import parse_chassis_power

READBACK_SECONDS = 30.0  # sushy-emulator applies a reset 1-11 s later; real BMCs take seconds too
READBACK_STEP = 1.0
MISMATCH = "mismatch"  # the action was taken but the power read back is not what it leaves
# The Redfish ResetType for each action, preferred first; the first one the system allows is sent.
REDFISH_RESET = {
    "on": ("On", "ForceOn"),
    "off": ("ForceOff",),
    "cycle": ("PowerCycle", "ForceRestart"),
    "reset": ("ForceRestart", "GracefulRestart"),
}


@dataclass
class PowerOutcome:
    result: str  # PollResult's ok / auth_failed / unreachable / error, or MISMATCH
    message: str
    power_state: str = ""  # on / off, as read back
    transcript: str = ""


async def _read_back(read, expected: str | None, readback_seconds: float) -> str:
    """The power state, read until it is `expected` (None: once) or READBACK_SECONDS have passed."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + readback_seconds
    while True:
        state = await read()
        if expected is None or state == expected or loop.time() >= deadline:
            return state
        await asyncio.sleep(READBACK_STEP)


async def ipmi_power(login: BmcLogin, run: IpmiRun, action: str, *, readback_seconds: float) -> PowerOutcome:
    transcript: list[str] = []

    async def command(words: list[str]) -> str:
        code, stdout, stderr = await run(words)
        transcript.append(_command_block(" ".join(words), code, stdout, stderr))
        if code != 0:
            if "unable to establish" in (stderr + stdout).lower():
                _, probe_out, probe_err = await run(PROBE)
                stderr = probe_err + probe_out + stderr
            raise _ipmi_failure(login, stderr or stdout)
        return stdout

    async def status() -> str:
        text = await command(["chassis", "power", "status"])
        try:
            return parse_chassis_power(text)
        except ParseError as error:
            raise BmcFailure(PollResult.ERROR, f"{login.name}: unreadable power status ({error})") from None

    try:
        if action != "status":
            await command(["chassis", "power", action])
        state = await _read_back(status, POWER_AFTER.get(action), readback_seconds)
    except BmcFailure as failure:
        failure.transcript = "\n".join(transcript)
        raise
    return _judged(login, action, state, "\n".join(transcript), f"chassis power {action}")


async def redfish_power(login: BmcLogin, send: RedfishSend, action: str, *, readback_seconds: float) -> PowerOutcome:
    reader = RedfishReader(login, send)
    root = await reader.get("/redfish/v1/", record=False)
    await reader.log_in(root)
    try:
        system_path = await reader.system_path(root)
        system = await reader.get(system_path)
        sent = ""
        if action != "status":
            reset = (system.get("Actions") or {}).get("#ComputerSystem.Reset") or {}
            target = reset.get("target") or f"{system_path}/Actions/ComputerSystem.Reset"
            allowed = reset.get("ResetType@Redfish.AllowableValues")
            choices = [value for value in REDFISH_RESET[action] if not isinstance(allowed, list) or value in allowed]
            if not choices:
                raise BmcFailure(
                    PollResult.ERROR,
                    f"{login.name} allows no ResetType for {action} (it allows {', '.join(map(str, allowed))})",
                )
            sent = choices[0]
            status = await reader.post(target, {"ResetType": sent})
            if status not in (200, 202, 204):
                raise BmcFailure(PollResult.ERROR, f"{login.name}: the {sent} reset answered HTTP {status}")

        async def state() -> str:
            return str((await reader.get(system_path)).get("PowerState") or "").lower()

        power_state = await _read_back(state, POWER_AFTER.get(action), readback_seconds)
    except BmcFailure as failure:
        failure.transcript = "\n".join(reader.transcript)
        raise
    finally:
        await reader.log_out()
    return _judged(login, action, power_state, "\n".join(reader.transcript), f"ResetType {sent}" if sent else "")


def _judged(login: BmcLogin, action: str, state: str, transcript: str, sent: str) -> PowerOutcome:
    expected = POWER_AFTER.get(action)
    if expected is not None and state != expected:
        message = f"{login.name}: {sent} was taken, but the power reads {state or 'nothing'}, not {expected}"
        return PowerOutcome(MISMATCH, message, state, transcript)
    done = f"{action}: " if action != "status" else ""
    return PowerOutcome(PollResult.OK, f"{done}power is {state} ({login.name})", state, transcript)


async def power(
    login: BmcLogin, *, action: str, ipmi: IpmiRun, redfish: RedfishSend, readback_seconds: float = READBACK_SECONDS
) -> PowerOutcome:
    """One power action on one BMC; every failure comes back as an outcome naming the BMC (never raises)."""
    try:
        if not login.address:
            raise BmcFailure(PollResult.ERROR, f"{login.hostname} has no BMC address in the inventory")
        if not login.user:
            raise BmcFailure(PollResult.ERROR, f"{login.name} has no user set")
        try:
            await asyncio.to_thread(check_target, login.address)
        except OutboundRefused as error:
            raise BmcFailure(PollResult.ERROR, f"{login.name}: {error}") from None
        if login.protocol == BmcProtocol.REDFISH:
            return await redfish_power(login, redfish, action, readback_seconds=readback_seconds)
        return await ipmi_power(login, ipmi, action, readback_seconds=readback_seconds)
    except BmcFailure as failure:
        return PowerOutcome(failure.result, failure.message, "", getattr(failure, "transcript", ""))


# --- starting it ----------------------------------------------------------------------------------------------------


def nodes_without_bmc(nodes) -> list[str]:
    """Host names of the nodes no power action can reach: no BMC settings, or no BMC address."""
    with_bmc = set(Bmc.objects.filter(node__in=nodes).values_list("node_id", flat=True))
    return sorted(node.hostname for node in nodes if node.pk not in with_bmc or not node.bmc_address)


def start_bmc_power(
    *, nodes, action: str, requested_by=None, reason: str = "", transport: str | None = None, queue: bool = True
) -> Job:
    """Start a `bmc-power` job on these nodes. Raises serializers.ValidationError naming the field (`action`,
    `nodes`, `reason`); nothing is started then. An action that takes the nodes down (off, cycle, reset) is audited
    on each node with who asked and why."""
    nodes = list(nodes)
    errors: dict = {}
    if action not in POWER_ACTIONS:
        errors["action"] = [f"Choose one of {', '.join(POWER_ACTIONS)}."]
    if not nodes:
        errors["nodes"] = ["Name at least one node."]
    elif missing := nodes_without_bmc(nodes):
        errors["nodes"] = [f"No BMC login for {', '.join(missing)}: set its BMC settings on the node page first."]
    if errors:
        raise serializers.ValidationError(errors)
    job = create_job(
        kind=POWER_KIND,
        targets=TargetSpec(nodes=tuple(str(node.public_id) for node in nodes)),
        parameters={"action": action, "reason": reason},
        transport=transport,
        requested_by=requested_by,
        queue=queue,
    )
    if action in DESTRUCTIVE_ACTIONS:
        for node in nodes:
            audit.record(
                AuditAction.START,
                obj=node,
                object_repr=f"{node.hostname}: power {action} through the BMC",
                changes={"bmc_power": action, "reason": reason, "job": str(job.public_id)},
                user=requested_by,
                job=job,
            )
    return job
