"""Real BMC emulators on free loopback ports: OpenIPMI's ipmi_sim (IPMI 2.0 lanplus) and sushy-tools'
sushy-emulator (Redfish over HTTPS). Missing means skip here, fail under CI=true.

What they offer was checked on this machine kind (DESIGN.md, "Telemetry"): ipmi_sim accepts only cipher suite 3,
has no sensor records unless its command file adds them (we add a temperature, a fan and a power sensor) and no DCMI
power reading; sushy-emulator --fake serves Chassis with Thermal but no Power, and HTTP Basic auth but no sessions.
"""

import datetime
import ipaddress
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import bcrypt
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tests.live_server import need

USER, PASSWORD = "rackpilot", "emulator-Secret-42"


def free_port(kind=socket.SOCK_STREAM) -> int:
    with socket.socket(socket.AF_INET, kind) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


# --- ipmi_sim -------------------------------------------------------------------------------------------------------

# (name, entity id, sensor type, IPMI unit code, M factor, raw value): the value read is M × raw.
IPMI_SENSORS = (
    ("Inlet Temp", 0x07, 0x01, 1, 1, 24),  # 24 degrees C, system board
    ("FAN1", 0x1D, 0x04, 18, 60, 120),  # 7200 RPM, fan device
    ("Total Power", 0x13, 0x0B, 6, 50, 140),  # 7000 Watts, power unit
)


def full_sensor_record(number: int, name: str, entity: int, sensor_type: int, unit: int, m: int, raw: int) -> str:
    """An IPMI Full Sensor Record (SDR type 01, IPMI 2.0 table 43-1) as ipmi_sim's main_sdr_add wants it (0x bytes)."""
    body = [
        0x20, 0x00, number, entity, 0x01,  # owner (the BMC), LUN, sensor number, entity id and instance
        0x67, 0x88, sensor_type, 0x01,  # initialisation, capabilities, sensor type, threshold reading type
        0xC0, 0x0F, 0xC0, 0x7F, 0x38, 0x38,  # assertion, deassertion and reading masks
        0x00, unit, 0x00, 0x00,  # unsigned analog, base unit, no modifier, linear
        m, 0x00, 0x00, 0x00, 0x00, 0x00,  # M, tolerance, B, accuracy, exponents
        0x01, raw, 0xFF, 0x00, 0xFF, 0x00,  # nominal given, nominal, normal max/min, sensor max/min
        0xF0, 0xE0, 0xD0, 0x00, 0x00, 0x00,  # upper non-recoverable, critical, non-critical; no lower ones
        0x00, 0x00, 0x00, 0x00, 0x00,  # hysteresis, reserved, OEM
        0xC0 | len(name), *name.encode(),  # 8-bit ASCII id string
    ]  # fmt: skip
    record = [0x00, 0x00, 0x51, 0x01, len(body), *body]
    return "main_sdr_add 0x20 " + " ".join(f"0x{byte:02x}" for byte in record)


def ipmi_commands() -> str:
    lines = [
        "mc_setbmc 0x20",
        "mc_add 0x20 0 no-device-sdrs 0x23 9 8 0x9f 0x1291 0xf02",
        "sel_enable 0x20 1000 0x0a",
        "sensor_add 0x20 0 0 35 0x6f event-only",  # the watchdog: ipmi_sim wants it as sensor 0
    ]
    for number, (name, entity, sensor_type, unit, m, raw) in enumerate(IPMI_SENSORS, start=1):
        lines += [
            f"sensor_add 0x20 0 {number} 0x{sensor_type:02x} 0x01",
            full_sensor_record(number, name, entity, sensor_type, unit, m, raw),
            f"sensor_set_value 0x20 0 {number} {raw} 0",
            # without scanning on, ipmitool lists the sensor as 'disabled | ns'
            f"sensor_set_event_support 0x20 0 {number} enable scanning per-state " + " ".join(["000000000000000"] * 4),
        ]
    return "\n".join([*lines, "mc_enable 0x20", ""])


def ipmi_lan(port: int) -> str:
    return "\n".join(
        [
            'name "rackpilot-test"',
            "set_working_mc 0x20",
            "  startlan 1",
            f"    addr 127.0.0.1 {port}",
            "    priv_limit admin",
            *(
                f"    allowed_auths_{level} none md2 md5 straight"
                for level in ("callback", "user", "operator", "admin")
            ),
            "    guid a123456789abcdefa123456789abcdef",
            "  endlan",
            f'  user 2 true "{USER}" "{PASSWORD}" admin 10 none md2 md5 straight',
            "",
        ]
    )


@dataclass
class Emulator:
    port: int
    process: subprocess.Popen
    root: Path
    ca_file: Path | None = None

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def start_ipmi_sim(root: Path) -> Emulator:
    need(shutil.which("ipmi_sim"), "needs OpenIPMI's ipmi_sim (apt-get install openipmi)")
    need(shutil.which("ipmitool"), "needs ipmitool (apt-get install ipmitool)")
    port = free_port(socket.SOCK_DGRAM)
    (root / "lan.conf").write_text(ipmi_lan(port))
    (root / "sim.emu").write_text(ipmi_commands())
    (root / "state").mkdir()
    process = subprocess.Popen(
        ["ipmi_sim", "-c", "lan.conf", "-f", "sim.emu", "-n", "-s", str(root / "state")],
        cwd=root,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    emulator = Emulator(port, process, root)
    env = {"IPMI_PASSWORD": PASSWORD, "PATH": "/usr/bin:/bin"}
    argv = ["ipmitool", "-I", "lanplus", "-C", "3", "-H", "127.0.0.1", "-p", str(port), "-U", USER, "-E"]
    for _ in range(50):  # it answers within a second here
        if subprocess.run([*argv, "-N", "1", "-R", "1", "mc", "guid"], env=env, capture_output=True).returncode == 0:
            return emulator
        if process.poll() is not None:
            break
        time.sleep(0.2)
    emulator.stop()
    raise RuntimeError("ipmi_sim did not answer on its LAN port")


# --- sushy-emulator -------------------------------------------------------------------------------------------------


def self_signed(root: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 and its key: the emulator's HTTPS, and the CA a test may choose to trust."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "rackpilot test BMC")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = root / "bmc.crt", root / "bmc.key"
    cert_file.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_file, key_file


def sushy_binary() -> str | None:
    beside = Path(sys.executable).parent / "sushy-emulator"
    return str(beside) if beside.exists() else shutil.which("sushy-emulator")


def start_sushy(root: Path) -> Emulator:
    binary = sushy_binary()
    need(binary, "needs sushy-tools' sushy-emulator (pip install sushy-tools: the test extras)")
    import requests

    port = free_port()
    cert_file, key_file = self_signed(root)
    (root / "htpasswd").write_text(f"{USER}:{bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(rounds=4)).decode()}\n")
    (root / "emulator.conf").write_text(f"SUSHY_EMULATOR_AUTH_FILE = {str(root / 'htpasswd')!r}\n")
    process = subprocess.Popen(
        [binary, "--fake", "-i", "127.0.0.1", "-p", str(port), "--config", str(root / "emulator.conf")]
        + ["--ssl-certificate", str(cert_file), "--ssl-key", str(key_file)],
        cwd=root,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    emulator = Emulator(port, process, root, ca_file=cert_file)
    for _ in range(100):
        try:
            if requests.get(f"https://127.0.0.1:{port}/redfish/v1/", verify=str(cert_file), timeout=1).ok:
                return emulator
        except requests.RequestException:
            pass
        if process.poll() is not None:
            break
        time.sleep(0.2)
    emulator.stop()
    raise RuntimeError("sushy-emulator did not answer")
