"""What every page the tests fetch must hold, whatever the test is about: ids unique within the page.

A repeated id breaks the page quietly (the GPU-hours charts never rendered: a table and the figure's JSON shared
one id, and the chart script read the table), so the browser client of the tests refuses such a page outright."""

from collections import Counter
from html.parser import HTMLParser

from django.test import Client


class _Ids(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.ids = Counter()

    def handle_starttag(self, tag, attrs):
        for name, value in attrs:
            if name == "id" and value:
                self.ids[value] += 1


def repeated_ids(html: str) -> list[str]:
    """The ids that more than one element of the page carries."""
    parser = _Ids()
    parser.feed(html)
    return sorted(name for name, count in parser.ids.items() if count > 1)


class PageClient(Client):
    """Django's test client that checks each HTML page it receives for repeated ids."""

    def request(self, **request):
        response = super().request(**request)
        if response.get("Content-Type", "").startswith("text/html") and not response.streaming:
            repeated = repeated_ids(response.content.decode(errors="replace"))
            assert not repeated, f"{request.get('PATH_INFO')} repeats the ids {repeated}"
        return response
