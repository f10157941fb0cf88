"""Settings come from the environment only, every variable is documented, and the production settings are safe."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from django.core.exceptions import ImproperlyConfigured
from django.core.management import get_commands

from portal.env import database_from_url, env_bool, env_int, env_list

# Settings from the environment, for each wiring (wirings: CI runs these on SQLite too).
pytestmark = pytest.mark.wirings

ROOT = Path(__file__).resolve().parents[2]


def test_every_variable_read_in_portal_is_documented():
    source = "".join(path.read_text() for path in (ROOT / "portal").glob("*.py"))
    names = set(re.findall(r'env_(?:str|bool|int|list)\(\s*"([A-Z_]+)"', source))
    assert {"DATABASE_URL", "REDIS_URL", "RACKPILOT_SECRET_KEY", "RACKPILOT_DEBUG"} <= names
    documented = (ROOT / "docs" / "configuration.md").read_text()
    assert [name for name in sorted(names) if f"`{name}`" not in documented] == []


def test_env_helpers_refuse_bad_values(monkeypatch):
    monkeypatch.setenv("X_FLAG", "maybe")
    with pytest.raises(ImproperlyConfigured, match="X_FLAG must be a boolean"):
        env_bool("X_FLAG")
    monkeypatch.setenv("X_NUM", "ten")
    with pytest.raises(ImproperlyConfigured, match="X_NUM must be an integer"):
        env_int("X_NUM", 1)
    monkeypatch.setenv("X_LIST", "a, b,,c")
    assert env_list("X_LIST", []) == ["a", "b", "c"]


def test_database_url_forms():
    pg = database_from_url("postgres://ops:p%40ss@db.example:5433/rackpilot?sslmode=require")
    assert pg["ENGINE"] == "django.db.backends.postgresql"
    assert (pg["USER"], pg["PASSWORD"], pg["HOST"], pg["PORT"], pg["NAME"]) == (
        "ops",
        "p@ss",
        "db.example",
        "5433",
        "rackpilot",
    )
    assert pg["OPTIONS"] == {"sslmode": "require"}
    assert database_from_url("sqlite:////tmp/x.sqlite3")["NAME"] == "/tmp/x.sqlite3"
    with pytest.raises(ImproperlyConfigured, match="mysql"):
        database_from_url("mysql://x@y/z")


def _manage(*args, env_overrides, embedded: bool = False):
    """manage.py in a subprocess with only the variables given; `embedded` also drops the services wiring's URLs
    (CI runs the suite with them set)."""
    dropped = ("RACKPILOT_", "DJANGO_") + (("DATABASE_URL", "REDIS_URL") if embedded else ())
    env = {key: value for key, value in os.environ.items() if not key.startswith(dropped)}
    env.update(env_overrides)
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )


PRODUCTION = {
    "RACKPILOT_SECRET_KEY": "a-long-random-production-key-0123456789-abcdefghijklmnopqrstuvwxyz",
    "RACKPILOT_ALLOWED_HOSTS": "rackpilot.example.org",
    "RACKPILOT_CSRF_TRUSTED_ORIGINS": "https://rackpilot.example.org",
    "RACKPILOT_SECURE_SSL_REDIRECT": "1",
    "RACKPILOT_SECURE_COOKIES": "1",
    "RACKPILOT_HSTS_SECONDS": "31536000",
    "RACKPILOT_BEHIND_PROXY": "1",
    "RACKPILOT_SECRETS_KEY": "QmVVpLk5fG0uHt9vH2n0yqZx8yUq3w1m0Xo4eVbq2ZE=",
    "REDIS_URL": "redis://127.0.0.1:6379/9",
}


def test_check_deploy_is_clean_with_production_variables(tmp_path):
    result = _manage(
        "check", "--deploy", "--fail-level", "WARNING", env_overrides={**PRODUCTION, "RACKPILOT_VAR_DIR": str(tmp_path)}
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_services_wiring_refuses_to_start_without_a_secret_key(tmp_path):
    env = {key: value for key, value in PRODUCTION.items() if key != "RACKPILOT_SECRET_KEY"}
    result = _manage("check", env_overrides={**env, "RACKPILOT_VAR_DIR": str(tmp_path)})
    assert result.returncode != 0
    assert "RACKPILOT_SECRET_KEY must be set" in result.stderr


def test_services_wiring_refuses_to_start_without_a_secrets_key(tmp_path):
    env = {key: value for key, value in PRODUCTION.items() if key != "RACKPILOT_SECRETS_KEY"}
    result = _manage("check", env_overrides={**env, "RACKPILOT_VAR_DIR": str(tmp_path)})
    assert result.returncode != 0
    assert "RACKPILOT_SECRETS_KEY must be set" in result.stderr
    assert not (tmp_path / "secrets_key").exists()


def test_debug_is_off_unless_asked_for(settings):
    assert os.environ.get("RACKPILOT_DEBUG") is None
    assert settings.DEBUG is False


def test_every_command_in_the_compose_file_exists():
    compose = yaml.safe_load((ROOT / "docker" / "compose.yaml").read_text())
    commands = get_commands()
    checked = 0
    for name, service in compose["services"].items():
        argv = service.get("command")
        if not argv or name in {"postgres", "redis"}:
            continue
        if name == "prometheus":  # the image's own flags, with the lifecycle API Rackpilot's rule reloads need
            assert "--config.file=/etc/prometheus/prometheus.yml" in argv and "--web.enable-lifecycle" in argv
            continue
        checked += 1
        if argv[:2] == ["python", "manage.py"]:
            assert argv[2] in commands, f"{name}: no management command {argv[2]}"
        elif argv[0] == "uvicorn":
            module, attribute = argv[1].split(":")
            assert hasattr(__import__(module, fromlist=[attribute]), attribute), f"{name}: {argv[1]} missing"
        elif argv[0] == "celery":
            app = __import__(argv[argv.index("-A") + 1], fromlist=["celery_app"])
            assert app.celery_app.main == "rackpilot", f"{name}: no Celery app"
            assert argv[argv.index("-A") + 2] in {"worker", "beat"}
        else:
            pytest.fail(f"{name}: unexpected command {argv}")
    assert checked == 7  # migrate, web, worker (-Q jobs), system-worker (-Q system), beat, grafana-files, sim-exporters
    queues = {
        name: s["command"][s["command"].index("-Q") + 1]
        for name, s in compose["services"].items()
        if "-Q" in s.get("command", [])
    }
    assert queues == {"worker": "jobs", "system-worker": "system"}
    dockerfile = (ROOT / "docker" / "Dockerfile").read_text()
    assert '"portal.asgi:application"' in dockerfile
