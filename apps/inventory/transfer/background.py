"""Large imports run in the background, as a job of the jobs engine. The engine sits above the inventory, so it
installs the starter here (register_background_import, from its AppConfig.ready()); the import page and API call
start_background_import() without knowing what runs it.

Which imports go to the background: files larger than RACKPILOT_IMPORT_BACKGROUND_BYTES (256 KiB: some 1,500 CSV
nodes, ~10 s of work), unless the caller asks otherwise. A smaller one answers at once, problems or counts in the
same response, which is the better experience while it takes seconds.
"""

from collections.abc import Callable
from dataclasses import dataclass

from django.conf import settings


@dataclass(frozen=True)
class BackgroundImport:
    """The job importing the file: its public id, its API resource and its page (paths)."""

    job_id: str
    api_path: str
    page_path: str


Starter = Callable[..., BackgroundImport]
_starter: Starter | None = None


def register_background_import(starter: Starter) -> None:
    """starter(*, text, fmt, name, user, dry_run) -> BackgroundImport: stores the file and queues its import."""
    global _starter
    _starter = starter


def goes_to_background(size_bytes: int, asked: bool | None = None) -> bool:
    """Whether an import of this many bytes runs as a job: as asked, else by the size threshold."""
    if _starter is None:
        return False
    if asked is not None:
        return asked
    return size_bytes > settings.RACKPILOT_IMPORT_BACKGROUND_BYTES


def start_background_import(*, text: str, fmt: str, name: str = "", user=None, dry_run: bool = False):
    if _starter is None:
        raise RuntimeError("no background import is installed (the jobs app registers it)")
    return _starter(text=text, fmt=fmt, name=name, user=user, dry_run=dry_run)
