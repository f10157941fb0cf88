"""Static files: every page names the portal's icon (no 404 in the browser's console), and once collected (as
`manage.py serve` and the container image do) they are served with hashed names, gzip-compressed and cached for
good; before that (this suite, a fresh checkout) the plain names still work."""

import json
import os
import subprocess
import sys
import urllib.request

import pytest

from tests.live_server import ROOT

# collectstatic and WhiteNoise in the embedded wiring's own var dir (wirings).
pytestmark = pytest.mark.wirings


@pytest.mark.django_db
def test_every_page_names_the_icon_and_favicon_ico_leads_to_it(client):
    page = client.get("/login/").content.decode()
    assert '<link rel="icon" href="/static/favicon.svg" type="image/svg+xml">' in page  # nothing collected here
    icon = client.get("/static/favicon.svg")
    assert icon.status_code == 200 and icon["Content-Type"] == "image/svg+xml"
    old_style = client.get("/favicon.ico")  # what a browser asks for on a page that names no icon
    assert old_style.status_code == 301 and old_style["Location"] == "/static/favicon.svg"


@pytest.fixture
def live_server_env(tmp_path):
    """Collect the static files into the live server's own folder before it starts, as `serve` does."""
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "DATABASE_URL")}
    env.update(RACKPILOT_VAR_DIR=str(tmp_path), PYTHONPATH=str(ROOT))
    command = [sys.executable, "manage.py", "collectstatic", "--no-input", "--verbosity", "0"]
    subprocess.run(command, cwd=ROOT, env=env, check=True, timeout=300)
    return {}


def _get(url: str, **headers):
    with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=30) as response:
        return response.status, response.headers, response.read()


@pytest.mark.integration
def test_collected_files_are_hashed_compressed_and_cached_for_good(live_server_url, tmp_path):
    manifest = json.loads((tmp_path / "static" / "staticfiles.json").read_text())["paths"]
    plotly = manifest["vendor/plotly/plotly.min.js"]
    assert plotly != "vendor/plotly/plotly.min.js"  # a hashed name

    _, _, page = _get(f"{live_server_url}/login/")
    assert f'href="/static/{manifest["css/rackpilot.css"]}"' in page.decode()
    assert f'href="/static/{manifest["favicon.svg"]}"' in page.decode()

    status, headers, body = _get(f"{live_server_url}/static/{plotly}", **{"Accept-Encoding": "gzip"})
    assert status == 200 and headers["Content-Encoding"] == "gzip"
    assert len(body) < 2_000_000  # 4.8 MB as sent uncompressed
    assert headers["Cache-Control"] == "max-age=315360000, public, immutable"
    status, headers, body = _get(f"{live_server_url}/static/{plotly}")  # a client that takes no gzip
    assert status == 200 and "Content-Encoding" not in headers and len(body) > 4_000_000
