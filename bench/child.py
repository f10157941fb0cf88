"""What the benches that measure one size per process share: a throwaway SQLite database per run, and Django set
up inside the child."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run_on_fresh_sqlite(script: str, name: str, args: list[str]) -> dict:
    """Run `script --child ARGS` on a new SQLite database under var/bench/NAME/; its last stdout line is JSON."""
    var_dir = ROOT / "var" / "bench" / name
    shutil.rmtree(var_dir, ignore_errors=True)
    var_dir.mkdir(parents=True)
    env = {**os.environ, "RACKPILOT_VAR_DIR": str(var_dir), "RACKPILOT_LOG_LEVEL": "WARNING"}
    env.pop("DATABASE_URL", None)
    env.pop("REDIS_URL", None)
    command = [sys.executable, script, "--child", *args]
    output = subprocess.run(command, env=env, check=True, capture_output=True, text=True, cwd=ROOT).stdout
    return json.loads(output.strip().splitlines()[-1])


def setup_django() -> None:
    """In the child: Django on the settings of the environment run_on_fresh_sqlite prepared."""
    import django

    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
    django.setup()
