"""Does each page fit the screen? Every page served over HTTP from this process and opened in headless Chromium at
1440 x 900, as a logged-in operator: the page must not scroll sideways (a wide table scrolls inside its own frame),
and its height is printed in screens. Used by bench/pages.py --screen on the same grown database."""

import logging
import threading
from wsgiref.simple_server import WSGIRequestHandler

VIEWPORT = {"width": 1440, "height": 900}
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]

# What the page lays out: the document's own width and height, and the widest element that sticks out past the
# viewport without a scrolling frame of its own around it (what makes the page scroll sideways).
MEASURE = """() => {
  const root = document.documentElement;
  let widest = null, right = window.innerWidth;
  for (const element of document.body.querySelectorAll('*')) {
    const box = element.getBoundingClientRect();
    if (box.right <= right + 1) continue;
    let framed = false;
    for (let up = element.parentElement; up && up !== document.body; up = up.parentElement) {
      const overflow = getComputedStyle(up).overflowX;
      if (overflow === 'auto' || overflow === 'scroll' || overflow === 'hidden') { framed = true; break; }
    }
    if (!framed) { right = box.right; widest = element.tagName.toLowerCase() + (element.id ? '#' + element.id : '')
      + (element.className && typeof element.className === 'string' ? '.' + element.className.split(' ')[0] : ''); }
  }
  return {width: root.scrollWidth, height: root.scrollHeight, viewport: window.innerWidth, widest};
}"""


class _Quiet(WSGIRequestHandler):
    def log_message(self, *args) -> None:  # the bench prints its own table
        pass


def serve() -> tuple[str, callable]:
    """The portal over HTTP on a free loopback port, in a thread of this process (its database is the bench's)."""
    from django.core.servers.basehttp import ThreadedWSGIServer
    from django.core.wsgi import get_wsgi_application

    server = ThreadedWSGIServer(("127.0.0.1", 0), _Quiet)
    server.set_app(get_wsgi_application())
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}", server.shutdown


def measure(paths: dict[str, str], session_cookie: tuple[str, str]) -> dict[str, dict]:
    """Each page's layout at 1440 x 900 once it has loaded (its scripts, Plotly's figures, included)."""
    from playwright.sync_api import sync_playwright

    # This server speaks no websockets: the live pages' sockets are refused (404) and they poll instead.
    logging.getLogger("django.request").setLevel(logging.ERROR)
    base, stop = serve()
    found = {}
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            context = browser.new_context(viewport=VIEWPORT)
            name, value = session_cookie
            context.add_cookies([{"name": name, "value": value, "url": base}])
            page = context.new_page()
            for label, path in paths.items():
                response = page.goto(base + path, wait_until="load", timeout=60_000)
                page.wait_for_timeout(300)  # the page's own first fetches and figures
                found[label] = {"status": response.status if response else 0, **page.evaluate(MEASURE)}
            browser.close()
    finally:
        stop()
    return found


def report(found: dict[str, dict]) -> list[str]:
    """Print one line a page; the pages that scroll sideways."""
    header = f"{'page':<26} {'status':>6} {'width px':>8} {'height px':>9} {'screens':>7}  fits the width"
    print(header)
    print("-" * len(header))
    wide = []
    for label, m in found.items():
        fits = m["width"] <= m["viewport"]
        wide += [] if fits else [label]
        note = "yes" if fits else f"NO (widest: {m['widest']})"
        print(f"{label:<26} {m['status']:>6} {m['width']:>8} {m['height']:>9} {m['height'] / 900:>7.1f}  {note}")
    return wide
