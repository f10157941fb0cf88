"""An uploaded import file waiting for the worker that imports it in the background."""

import zlib

from django.conf import settings
from django.db import models

from apps.core.models import PublicModel


class ImportFile(PublicModel):
    """The bytes of a file a background import reads (zlib-compressed), kept in the database so that a worker on
    any host can read it; deleted when its import ends."""

    name = models.CharField(max_length=255, blank=True, help_text="The uploaded file's name, as the user gave it.")
    fmt = models.CharField(max_length=8, help_text="json, yaml or csv.")
    content = models.BinaryField(help_text="zlib-compressed UTF-8 text of the file.")
    size_bytes = models.PositiveBigIntegerField(default=0)
    uploaded_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="import_files"
    )

    class Meta:
        ordering = ["-created", "-id"]

    def __str__(self) -> str:
        return self.name or f"import {self.public_id}"

    @classmethod
    def of(cls, *, text: str, fmt: str, name: str = "", user=None) -> "ImportFile":
        data = text.encode("utf-8")
        who = user if getattr(user, "is_authenticated", False) else None
        return cls(name=name[:255], fmt=fmt, content=zlib.compress(data, 6), size_bytes=len(data), uploaded_by=who)

    def text(self) -> str:
        return zlib.decompress(bytes(self.content)).decode("utf-8")
