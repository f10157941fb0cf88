"""Reading a BMC: IPMI (`ipmitool -I lanplus -C 3 ... sdr`, then `dcmi power reading`) or Redfish (a session, then
each chassis' Thermal / Power / EnvironmentMetrics, or ThermalSubsystem's ThermalMetrics, and a liquid-cooled chassis'
coolant connectors and leak detectors). Parsed by apps.parsers.

The flow is one piece of code for every transport; only two primitives differ: how an ipmitool command is run
(`local`: a subprocess on the worker's host; `sim`: the simulated BMC) and how an HTTP request is sent (`local`:
requests; `sim`: the simulated Redfish service). Everything here runs on the jobs engine's event loop: blocking work
goes through asyncio.to_thread.

Secrets: the password reaches ipmitool through its IPMI_PASSWORD environment variable (`-E`), never its command line
(which `ps` shows to every user); Redfish sends it once, in the session request's body. Neither the password nor a
session token is ever written into a transcript, an error or a log line.

The login comes from apps/monitoring/bmc/logins.py, what a poll gives back is apps/monitoring/bmc/readings.py.
"""

import asyncio
import base64
import contextlib
import json
import os
import warnings
from collections.abc import Awaitable, Callable
from datetime import datetime

import requests
import urllib3
from django.utils import timezone

from apps.core.outbound import OutboundRefused, check_target
from apps.core.threads import thread_connection_returned
from apps.inventory.models import Node, NvlinkSwitchTray
from apps.monitoring.bmc.logins import BmcLogin
from apps.monitoring.bmc.readings import PollOutcome, Reading, coolant_of
from apps.monitoring.choices import BmcProtocol, PollResult, SensorKind
from apps.nodeexec.sim import simulated_bmc
from apps.parsers.errors import ParseError
from apps.parsers.ipmi import parse_chassis_power, parse_dcmi_power, parse_ipmitool
from apps.parsers.redfish import (
    CoolantConnector,
    LeakDetector,
    RedfishReport,
    parse_coolant_connector,
    parse_leak_detector,
    parse_redfish,
)

TRANSCRIPT_BODY_LIMIT = 64 * 1024  # of each Redfish document kept in the cell's output
MAX_CHASSIS = 8  # an HGX system lists a few chassis (the system, the GPU baseboard); more is not a server
UNITS = {"C": SensorKind.TEMPERATURE, "RPM": SensorKind.FAN, "W": SensorKind.POWER, "%": SensorKind.FAN}


class BmcFailure(Exception):
    """A poll that could not read the BMC: the result to record and a message naming the BMC."""

    def __init__(self, result: str, message: str):
        super().__init__(message)
        self.result, self.message = result, message


# --- IPMI -----------------------------------------------------------------------------------------------------------

# (argv after the connection options, exit code, stdout, stderr)
IpmiRun = Callable[[list[str]], Awaitable[tuple[int, str, str]]]
# ipmitool says "Unable to establish IPMI v2 / RMCP+ session" both for a refused login and for a BMC that never
# answered; with -v it first prints why. These are its RAKP refusals (a wrong password, an unknown user).
REFUSAL_MARKERS = ("rakp 2 hmac is invalid", "unauthorized name", "invalid user name", "invalid password")
NO_ANSWER_MARKERS = ("get auth capabilities error", "no response", "timeout", "unable to establish")
PROBE = ["-v", "mc", "guid"]  # a small command, run with -v only after a failure, to learn why


def ipmitool_argv(login: BmcLogin, command: list[str], timeout: float) -> list[str]:
    """lanplus with cipher suite 3 (what ipmi_sim and many BMCs accept), the password from IPMI_PASSWORD (-E)."""
    retry_timeout = max(1, int(timeout // 3))
    return [
        "ipmitool", "-I", "lanplus", "-C", "3", "-H", login.address, "-p", str(login.port),
        "-U", login.user, "-E", "-N", str(retry_timeout), "-R", "1", *command,
    ]  # fmt: skip


def local_ipmitool(login: BmcLogin, timeout: float) -> IpmiRun:
    async def run(command: list[str]) -> tuple[int, str, str]:
        argv = ipmitool_argv(login, command, timeout)
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "IPMI_PASSWORD": login.password}
        try:
            process = await asyncio.create_subprocess_exec(
                *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env
            )
        except FileNotFoundError:
            raise BmcFailure(PollResult.ERROR, "ipmitool is not installed on this worker") from None
        try:
            stdout, stderr = await asyncio.wait_for(process.communicate(), timeout)
        except TimeoutError:
            process.kill()
            await process.wait()
            raise BmcFailure(PollResult.UNREACHABLE, f"{login.name} did not answer within {timeout:g} s") from None
        return process.returncode, stdout.decode(errors="replace"), stderr.decode(errors="replace")

    return run


async def read_ipmi(login: BmcLogin, run: IpmiRun) -> PollOutcome:
    transcript: list[str] = []
    code, stdout, stderr = await run(["sdr"])
    transcript.append(_command_block("sdr", code, stdout, stderr))
    if code != 0:
        if "unable to establish" in (stderr + stdout).lower():
            _, probe_out, probe_err = await run(PROBE)
            stderr = probe_err + probe_out + stderr
        raise _ipmi_failure(login, stderr or stdout)
    try:
        sensors = parse_ipmitool(stdout)
    except ParseError as error:
        raise BmcFailure(PollResult.ERROR, f"{login.name}: unreadable sdr output ({error})") from None
    readings = [
        Reading(UNITS[sensor.unit], sensor.name, sensor.unit, sensor.value)
        for sensor in sensors.sensors
        if sensor.value is not None and sensor.unit in UNITS and sensor.status not in ("ns", None)
    ]
    message = ""
    code, stdout, stderr = await run(["dcmi", "power", "reading"])
    transcript.append(_command_block("dcmi power reading", code, stdout, stderr))
    power = None
    if code == 0:
        try:
            power = parse_dcmi_power(stdout)
        except ParseError as error:
            message = f"unreadable DCMI power reading ({error})"
    else:
        message = f"no DCMI power reading ({_verdict_line(stderr or stdout)})"
    if power is not None and power.active and power.current_watts is not None:
        readings.append(Reading(SensorKind.POWER, "DCMI Power", "W", power.current_watts))
    elif power is not None:
        message = "DCMI power reading is deactivated on this BMC"
    outcome = _outcome(readings, message, "\n".join(transcript))
    code, stdout, stderr = await run(["chassis", "power", "status"])
    outcome.transcript += "\n" + _command_block("chassis power status", code, stdout, stderr)
    if code == 0:
        with contextlib.suppress(ParseError):  # an unreadable answer leaves the power state unknown, as none does
            outcome.power_state = parse_chassis_power(stdout)
    return outcome


def _ipmi_failure(login: BmcLogin, text: str) -> BmcFailure:
    lowered = text.lower()
    if any(marker in lowered for marker in REFUSAL_MARKERS):
        return BmcFailure(PollResult.AUTH_FAILED, f"{login.name} refused the credentials of user {login.user!r}")
    if any(marker in lowered for marker in NO_ANSWER_MARKERS):
        return BmcFailure(PollResult.UNREACHABLE, f"{login.name} did not answer: {_verdict_line(text)}")
    return BmcFailure(PollResult.ERROR, f"{login.name}: ipmitool failed: {_verdict_line(text)}")


def _command_block(command: str, code: int, stdout: str, stderr: str) -> str:
    return f"$ ipmitool ... {command}\n{stdout}{stderr}[exit {code}]\n"


def _verdict_line(text: str) -> str:
    """The line of ipmitool's output that says what went wrong: its last (earlier ones are the details)."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return (lines[-1] if lines else "no output")[:200]


# --- Redfish --------------------------------------------------------------------------------------------------------

# (method, path, headers, body) -> (status, headers, body)
RedfishSend = Callable[[str, str, dict, bytes | None], Awaitable[tuple[int, dict, bytes]]]


def local_redfish(login: BmcLogin, timeout: float) -> RedfishSend:
    session = requests.Session()
    session.verify = login.verify_tls
    base = f"https://{login.address}:{login.port}"

    def send(method: str, path: str, headers: dict, body: bytes | None) -> tuple[int, dict, bytes]:
        try:
            with warnings.catch_warnings():
                if not login.verify_tls:  # urllib3 warns on every request; the BMC's settings say so on purpose
                    warnings.simplefilter("ignore", urllib3.exceptions.InsecureRequestWarning)
                response = session.request(
                    method,
                    base + path,
                    headers=headers,
                    data=body,
                    timeout=timeout,
                    allow_redirects=False,
                    verify=login.verify_tls,  # per request: a session-wide False loses to REQUESTS_CA_BUNDLE
                )
        except requests.exceptions.SSLError:
            raise BmcFailure(
                PollResult.ERROR,
                f"{login.name}: its TLS certificate is not trusted (install the BMC's CA on the workers, or turn "
                "off TLS verification for this BMC)",
            ) from None
        except requests.exceptions.Timeout:
            raise BmcFailure(PollResult.UNREACHABLE, f"{login.name} did not answer within {timeout:g} s") from None
        except requests.exceptions.ConnectionError as error:
            reason = type(error.args[0]).__name__ if error.args else "connection failed"
            raise BmcFailure(PollResult.UNREACHABLE, f"{login.name} did not answer ({reason})") from None
        return response.status_code, dict(response.headers), response.content

    async def run(method: str, path: str, headers: dict, body: bytes | None) -> tuple[int, dict, bytes]:
        return await asyncio.to_thread(send, method, path, headers, body)

    return run


def bmc_link(
    login: BmcLogin,
    owner_id: int,
    *,
    transport: str,
    timeout: float,
    seed: int,
    load: float = 0.0,
    at=None,
    switch_tray: bool = False,
):
    """(ipmi, redfish): the two primitives for one BMC over the job's transport (the simulated BMC, or the worker's
    host); every BMC kind reads and acts through them. `owner_id` is the node's id, or the NVLink switch tray's where
    `switch_tray` says so."""
    if transport == "sim":
        link_class = SimulatedSwitchTrayLink if switch_tray else SimulatedBmcLink
        link = link_class(login, owner_id, seed=seed, load=load, at=at or timezone.now())
        return link.ipmitool, link.redfish
    return local_ipmitool(login, timeout), local_redfish(login, timeout)


class RedfishReader:
    """One poll of one Redfish service: log in, read the chassis sensors, log out."""

    def __init__(self, login: BmcLogin, send: RedfishSend):
        self.login, self.send = login, send
        self.auth: dict[str, str] = {}
        self.session_uri = ""
        self.transcript: list[str] = []
        self.connectors: list[CoolantConnector] = []
        self.detectors: list[LeakDetector] = []

    async def get(self, path: str, *, record: bool = True) -> dict:
        status, _, body = await self.send("GET", path, {"Accept": "application/json", **self.auth}, None)
        if record:
            text = body[:TRANSCRIPT_BODY_LIMIT].decode(errors="replace")
            self.transcript.append(f"GET {path} -> {status}\n{text}\n")
        if status in (401, 403):
            raise self._refused()
        if status != 200:
            raise BmcFailure(PollResult.ERROR, f"{self.login.name}: GET {path} answered HTTP {status}")
        try:
            data = json.loads(body)
        except ValueError:
            raise BmcFailure(PollResult.ERROR, f"{self.login.name}: GET {path} did not answer JSON") from None
        if not isinstance(data, dict):
            raise BmcFailure(PollResult.ERROR, f"{self.login.name}: GET {path} did not answer a JSON object")
        return data

    async def system_path(self, root: dict) -> str:
        """The first ComputerSystem the service lists (an HGX server has one): what power and the SEL act on."""
        systems = (root.get("Systems") or {}).get("@odata.id") or "/redfish/v1/Systems"
        members = (await self.get(systems, record=False)).get("Members") or []
        paths = [m.get("@odata.id") for m in members if isinstance(m, dict) and m.get("@odata.id")]
        if not paths:
            raise BmcFailure(PollResult.ERROR, f"{self.login.name} lists no ComputerSystem")
        return paths[0]

    async def post(self, path: str, document: dict) -> int:
        """A POST of a small JSON document (an action's parameters; never a secret), kept in the transcript."""
        body = json.dumps(document).encode()
        headers = {"Content-Type": "application/json", "Accept": "application/json", **self.auth}
        status, _, answer = await self.send("POST", path, headers, body)
        text = answer[:TRANSCRIPT_BODY_LIMIT].decode(errors="replace")
        self.transcript.append(f"POST {path} {body.decode()} -> {status}\n{text}\n")
        if status in (401, 403):
            raise self._refused()
        return status

    def _refused(self) -> BmcFailure:
        return BmcFailure(
            PollResult.AUTH_FAILED, f"{self.login.name} refused the credentials of user {self.login.user!r}"
        )

    async def log_in(self, root: dict) -> None:
        """A session (X-Auth-Token) where the service has a SessionService; HTTP Basic where it has none."""
        sessions = ((root.get("Links") or {}).get("Sessions") or {}).get("@odata.id")
        if not sessions and root.get("SessionService"):
            sessions = "/redfish/v1/SessionService/Sessions"
        if not sessions:
            token = base64.b64encode(f"{self.login.user}:{self.login.password}".encode()).decode()
            self.auth = {"Authorization": f"Basic {token}"}
            self.transcript.append("(no SessionService: HTTP Basic authentication)\n")
            return
        body = json.dumps({"UserName": self.login.user, "Password": self.login.password}).encode()
        status, headers, _ = await self.send("POST", sessions, {"Content-Type": "application/json"}, body)
        self.transcript.append(f"POST {sessions} -> {status}\n")
        if status in (400, 401, 403):
            raise self._refused()
        headers = {key.lower(): value for key, value in headers.items()}
        if status not in (200, 201) or "x-auth-token" not in headers:
            raise BmcFailure(PollResult.ERROR, f"{self.login.name}: creating a session answered HTTP {status}")
        self.auth = {"X-Auth-Token": headers["x-auth-token"]}
        self.session_uri = _path(headers.get("location", ""))

    async def log_out(self) -> None:
        if self.session_uri:
            with contextlib.suppress(BmcFailure):  # the session times out on the BMC anyway
                await self.send("DELETE", self.session_uri, dict(self.auth), None)
            self.session_uri = ""

    async def read(self) -> PollOutcome:
        root = await self.get("/redfish/v1/", record=False)
        await self.log_in(root)
        try:
            chassis_path = (root.get("Chassis") or {}).get("@odata.id") or "/redfish/v1/Chassis"
            members = (await self.get(chassis_path, record=False)).get("Members") or []
            readings: list[Reading] = []
            notes: list[str] = []
            paths = [member.get("@odata.id") for member in members if isinstance(member, dict)][:MAX_CHASSIS]
            power_states = []
            for path in filter(None, paths):
                chassis = await self.get(path, record=False)
                prefix = f"{chassis.get('Id', '')} " if len(paths) > 1 else ""
                readings += await self._chassis_readings(chassis, prefix, notes)
                power_states.append(str(chassis.get("PowerState") or "").lower())
        finally:
            await self.log_out()
        outcome = _outcome(readings, "; ".join(notes), "\n".join(self.transcript))
        outcome.coolant = coolant_of(self.connectors, self.detectors)
        # The first chassis that says (Chassis.PowerState, Redfish 1.0.1+); "PoweringOn" and the like say nothing yet.
        outcome.power_state = next((state for state in power_states if state in ("on", "off")), "")
        return outcome

    async def _chassis_readings(self, chassis: dict, prefix: str, notes: list[str]) -> list[Reading]:
        reports: list[RedfishReport] = []
        for resource in ("Thermal", "Power", "EnvironmentMetrics"):
            link = (chassis.get(resource) or {}).get("@odata.id")
            if link:
                reports.append(self._parse(await self.get(link)))
        thermal_subsystem = (chassis.get("ThermalSubsystem") or {}).get("@odata.id")
        if thermal_subsystem:
            subsystem = await self.get(thermal_subsystem, record=False)
            metrics = (subsystem.get("ThermalMetrics") or {}).get("@odata.id")
            if metrics and not chassis.get("Thermal"):
                reports.append(self._parse(await self.get(metrics)))
            await self._liquid_cooling(subsystem)
        if not any(report.resource in ("Power", "EnvironmentMetrics") for report in reports):
            notes.append(f"{prefix or 'the chassis '}has no Power or EnvironmentMetrics resource".replace("  ", " "))
        return _redfish_readings(reports, prefix)

    async def _liquid_cooling(self, subsystem: dict) -> None:
        """A liquid-cooled chassis' coolant connectors and leak detectors (Redfish 2023.2), where it lists them."""
        connectors = (subsystem.get("CoolantConnectors") or {}).get("@odata.id")
        for path in await self._members(connectors):
            self.connectors.append(self._parse_with(parse_coolant_connector, await self.get(path)))
        detection = (subsystem.get("LeakDetection") or {}).get("@odata.id")
        if detection:
            detectors = ((await self.get(detection, record=False)).get("LeakDetectors") or {}).get("@odata.id")
            for path in await self._members(detectors):
                self.detectors.append(self._parse_with(parse_leak_detector, await self.get(path)))

    async def _members(self, collection: str | None) -> list[str]:
        if not collection:
            return []
        members = (await self.get(collection, record=False)).get("Members") or []
        return [m["@odata.id"] for m in members if isinstance(m, dict) and m.get("@odata.id")][:MAX_CHASSIS]

    def _parse_with(self, parse, document: dict):
        try:
            return parse(json.dumps(document))
        except ParseError as error:
            raise BmcFailure(PollResult.ERROR, f"{self.login.name}: unreadable Redfish document ({error})") from None

    def _parse(self, document: dict) -> RedfishReport:
        try:
            return parse_redfish(json.dumps(document))
        except ParseError as error:
            raise BmcFailure(PollResult.ERROR, f"{self.login.name}: unreadable Redfish document ({error})") from None


def _redfish_readings(reports: list[RedfishReport], prefix: str) -> list[Reading]:
    """Legacy Thermal/Power first; EnvironmentMetrics and ThermalMetrics fill only what they did not give."""
    readings: dict[tuple[str, str], Reading] = {}
    kinds_seen: set[str] = set()
    for report in sorted(reports, key=lambda r: r.resource not in ("Thermal", "Power")):
        new: list[Reading] = []
        for sensor in report.temperatures:
            if sensor.reading is not None and sensor.state not in ("Absent", "Disabled"):
                new.append(Reading(SensorKind.TEMPERATURE, prefix + sensor.name, "C", sensor.reading))
        for fan in report.fans:
            if fan.reading is not None and fan.state not in ("Absent", "Disabled"):
                unit = "RPM" if (fan.unit or "").upper() == "RPM" else "%"
                new.append(Reading(SensorKind.FAN, prefix + fan.name, unit, fan.reading))
        if report.consumed_watts is not None:
            new.append(Reading(SensorKind.POWER, prefix + "Power Consumed", "W", report.consumed_watts))
        for supply in report.power_supplies:
            if supply.last_output_watts is not None:
                new.append(Reading(SensorKind.POWER, prefix + supply.name, "W", supply.last_output_watts))
        if report.resource in ("EnvironmentMetrics", "ThermalMetrics"):
            new = [reading for reading in new if reading.kind not in kinds_seen]
        for reading in new:
            readings.setdefault((reading.kind, reading.sensor), reading)
        kinds_seen |= {reading.kind for reading in new}
    return list(readings.values())


def _path(location: str) -> str:
    """A Location header may be absolute (https://bmc/redfish/v1/...) or a path."""
    index = location.find("/redfish/")
    return location[index:] if index >= 0 else ""


# --- the simulated BMCs ---------------------------------------------------------------------------------------------


class SimulatedBmcLink:
    """The two primitives answered by the simulated BMCs for one node (the simulator registers them with
    apps.nodeexec.sim): its figures are read once per poll, in a thread (they need the database), the first time a
    sensor document or command asks for them."""

    def __init__(self, login: BmcLogin, node_id: int, *, seed: int, load: float, at: datetime):
        self.login, self.node_id, self.seed, self.load, self.at = login, node_id, seed, load, at
        self.bmcs = simulated_bmc()
        self._figures = None
        self._tokens: set[str] = set()

    def _read_figures(self):
        with thread_connection_returned():
            node = Node.objects.get(pk=self.node_id)
            return self.bmcs.node_figures(node, seed=self.seed, load=self.load, at=self.at)

    async def figures(self):
        if self._figures is None:
            self._figures = await asyncio.to_thread(self._read_figures)
        return self._figures

    def _in_thread(self, call, *args, **kwargs):
        with thread_connection_returned():
            return call(Node.objects.get(pk=self.node_id), *args, **kwargs)

    async def state(self):
        """The chassis power and SEL, read afresh each time (a power action changes them)."""
        return await asyncio.to_thread(self._in_thread, self.bmcs.bmc_state)

    async def power(self, action: str) -> None:
        await asyncio.to_thread(self._in_thread, self.bmcs.chassis_control, action, seed=self.seed)

    async def ipmitool(self, command: list[str]) -> tuple[int, str, str]:
        argv = ipmitool_argv(self.login, command, 10)
        if not self.bmcs.logged_in(self.login.user, self.login.password):
            return self.bmcs.ipmitool(None, argv, password=self.login.password, at=self.at)
        if command[:2] == ["chassis", "power"] or command == ["sel", "elist"]:
            if command[:2] == ["chassis", "power"] and command[2:] != ["status"]:
                await self.power(command[2])  # the BMC obeys, then ipmitool says it took the request
            return self.bmcs.ipmitool(None, argv, password=self.login.password, at=self.at, state=await self.state())
        return self.bmcs.ipmitool(await self.figures(), argv, password=self.login.password, at=self.at)

    async def redfish(self, method: str, path: str, headers: dict, body: bytes | None) -> tuple[int, dict, bytes]:
        in_chassis = (path.rstrip("/") + "/").startswith(self.bmcs.CHASSIS + "/")  # the chassis says if it is liquid
        figures = await self.figures() if in_chassis and self._tokens else None
        state = await self.state() if path.startswith("/redfish/v1/Systems") and self._tokens else None
        answer = self.bmcs.redfish(
            lambda: figures, method, path, headers=headers, body=body, tokens=self._tokens, state_at=lambda: state
        )
        if method == "POST" and path == self.bmcs.RESET_TARGET and answer[0] == 204:
            await self.power(self.bmcs.RESET_TYPES[json.loads(body)["ResetType"]])
        return answer


class SimulatedSwitchTrayLink(SimulatedBmcLink):
    """The simulated BMC of an NVLink switch tray: Redfish only (its settings refuse IPMI), one chassis whose
    documents need the tray's figures."""

    def _read_figures(self):
        with thread_connection_returned():
            tray = NvlinkSwitchTray.objects.get(pk=self.node_id)
            return self.bmcs.switch_tray_figures(tray, seed=self.seed, load=self.load, at=self.at)

    async def ipmitool(self, command: list[str]) -> tuple[int, str, str]:
        return 1, "", "Error: Unable to establish IPMI v2 / RMCP+ session\n"  # it answers no IPMI

    async def redfish(self, method: str, path: str, headers: dict, body: bytes | None) -> tuple[int, dict, bytes]:
        in_chassis = (path.rstrip("/") + "/").startswith(self.bmcs.CHASSIS + "/")
        figures = await self.figures() if in_chassis and self._tokens else None
        return self.bmcs.switch_tray_redfish(
            lambda: figures, method, path, headers=headers, body=body, tokens=self._tokens
        )


# --- one poll -------------------------------------------------------------------------------------------------------


def _outcome(readings: list[Reading], message: str, transcript: str) -> PollOutcome:
    kinds = {reading.kind for reading in readings}
    if not readings:
        return PollOutcome(
            PollResult.PARTIAL, message or "the BMC lists no temperature, fan or power sensor", [], transcript
        )
    complete = SensorKind.TEMPERATURE in kinds and SensorKind.POWER in kinds
    return PollOutcome(PollResult.OK if complete else PollResult.PARTIAL, message, readings, transcript)


async def poll(login: BmcLogin, *, ipmi: IpmiRun, redfish: RedfishSend) -> PollOutcome:
    """Read one BMC; every failure comes back as an outcome that names the BMC (never raises BmcFailure)."""
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
            return await RedfishReader(login, redfish).read()
        return await read_ipmi(login, ipmi)
    except BmcFailure as failure:
        return PollOutcome(failure.result, failure.message)
