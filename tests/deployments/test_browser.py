"""An operator plans a deployment in the wizard, runs it against faulty simulated nodes in a real browser, reads the
failed cells and the suggestions that arrive live, approves a fix, resumes, and ends with every cell verified."""

import pytest

from apps.accounts.choices import Role
from apps.deployments.models import Deployment
from apps.inventory.models import Node
from apps.simulator import services as simulator
from tests import factories
from tests.browser.conftest import browser_page  # noqa: F401  (Chromium; the live server is a shared fixture)
from tests.browser.session import log_in

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.django_db(transaction=True)]

FAULTS = [("gpu025", "mtu", "ens1np0"), ("gpu026", "pfc_off", "3"), ("gpu027", "xid79", "0")]
RUN_TIMEOUT_MS = 180_000


# Checked at every frame the page paints: the deployment's header never says Running beside a run that has ended,
# and each phase's "verified" count is what the all-runs matrix below it shows.
WATCH_CONTRADICTIONS = """() => {
  window.contradictions = [];
  const ENDED = ["Succeeded", "Failed", "Canceled", "Error"];
  function sample() {
    const state = document.getElementById("deployment-state"), job = document.getElementById("job-status");
    if (state && job && state.textContent === "Running" && ENDED.includes(job.textContent)) {
      window.contradictions.push("header Running, run " + job.textContent);
    }
    for (const box of document.querySelectorAll("#phases .phase")) {
      const cells = document.querySelectorAll('#dmatrix td.dcell[data-phase="' + box.dataset.phase + '"]');
      const verified = [...cells].filter((c) => ["pass", "warn"].includes(c.dataset.outcome)).length;
      const shown = box.querySelector(".verified").textContent;
      if (shown !== String(verified)) {
        window.contradictions.push(`phase ${box.dataset.phase}: ${shown} verified, matrix ${verified}`);
      }
    }
    if (window.contradictions.length < 20) { requestAnimationFrame(sample); }
  }
  sample();
}"""


def cell(hostname: str, step: str) -> str:
    return f'#dmatrix td.dcell[data-host="{hostname}"][data-step="{step}"]'


def test_operator_deploys_rack_r04_fixes_what_failed_and_resumes_to_passed(live_server_url, browser_page):  # noqa: F811
    from apps.inventory.demo import DEMO, load_cluster

    load_cluster(DEMO)
    factories.make_user(role=Role.OPERATOR, username="op", password="correct-horse-battery")
    for hostname, kind, target in FAULTS:
        simulator.inject_fault(node=Node.objects.get(hostname=hostname), kind=kind, target=target)

    page = browser_page
    page.set_default_timeout(30000)
    log_in(page, live_server_url, "op")

    # 1. Nodes: rack r04 plus gpu017 (one BIOS version behind in the demo data).
    page.goto(f"{live_server_url}/deployments/")
    page.click("#new-deployment")
    page.fill("input[name=name]", "h200-r04")
    page.select_option("select[name=transport]", "sim")
    page.check('input[name=racks][value="r04"]')
    page.fill("input[name=hostnames]", "gpu017")
    page.click("#next")
    page.wait_for_url("**/wizard/versions/")
    deployment = Deployment.objects.get(name="h200-r04")
    assert deployment.nodes.count() == 9

    # 2. Versions as pre-filled.
    page.click("#next")
    page.wait_for_url("**/wizard/review/")

    # 3. Review: the dry run is there; no cool-down between retries so a failing check does not wait.
    assert page.locator('#dry-run details[data-host="gpu017"]').count() == 1
    for field in page.locator("input[name$=__cooldown_seconds]").all():
        field.fill("0")
    page.click("#next")
    page.wait_for_url("**/wizard/approve/")
    deployment.refresh_from_db()
    assert all(values["cooldown_seconds"] == 0 for values in deployment.criteria.values())

    # 4. Approve the plan, no disruptive step up front.
    for box in page.locator("input[name=steps]").all():
        box.uncheck()
    page.click("#approve-plan")
    page.wait_for_url("**/wizard/run/")

    # 5. Start, and watch the run end in the running view (over one websocket: the page's job stream).
    sockets = []
    page.on("websocket", lambda socket: sockets.append(socket.url))
    page.click("#start")
    page.wait_for_url(f"**/deployments/{deployment.public_id}/")
    page.evaluate(WATCH_CONTRADICTIONS)
    page.wait_for_function(
        "document.getElementById('deployment-state')?.textContent === 'Needs attention'", timeout=RUN_TIMEOUT_MS
    )
    assert len([url for url in sockets if "/ws/jobs/" in url]) == 1, sockets
    assert page.evaluate("window.contradictions") == []
    for hostname, step in [("gpu025", "mtu"), ("gpu026", "roce"), ("gpu027", "gpus"), ("gpu017", "firmware")]:
        assert page.locator(cell(hostname, step)).get_attribute("data-outcome") == "fail", (hostname, step)
    titles = " | ".join(page.locator("#suggestions .suggestion .title").all_inner_texts())
    for words in ("MTU", "PFC", "XID 79", "irmware"):
        assert words in titles, titles

    # A failed cell shows its verdicts and a link to the raw output.
    page.click(cell("gpu017", "firmware"))
    page.wait_for_selector('#cell-verdicts .cell-verdicts[data-host="gpu017"]')
    assert page.locator("#cell-verdicts .raw-output").count() == 1

    # Clear the faults, approve the firmware fix, resume.
    for hostname in ("gpu025", "gpu026", "gpu027", "gpu017"):
        simulator.clear_all(Node.objects.get(hostname=hostname))
    firmware = page.locator('.suggestion[data-host="gpu017"][data-state="open"]')
    firmware.locator("button.approve-fix").click()
    page.wait_for_selector('.suggestion[data-host="gpu017"][data-state="approved"]')
    page.click("#resume")
    # The resume posts and the page is replaced: the state may be asked of a document that has none yet (?.).
    page.wait_for_function(
        "document.getElementById('deployment-state')?.textContent === 'Passed'", timeout=RUN_TIMEOUT_MS
    )
    assert page.locator("#dmatrix td.dcell").count() > 0
    assert page.locator("#dmatrix td.dcell:not(.green)").count() == 0
    assert deployment.runs.count() == 2

    # The acceptance report.
    page.click("#report-link")
    page.wait_for_selector("#report")
    assert page.locator("#accepted").inner_text() == "Accepted: yes"
    assert "gpu017" in page.locator("#approvals").inner_text()
