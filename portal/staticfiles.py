"""Static files: hashed, gzip-compressed copies once collectstatic has run (`manage.py serve` and the container
image run it), cached by browsers for good; before that (a fresh checkout, the test suite) the plain names, which
WhiteNoise serves from the source folders (WHITENOISE_USE_FINDERS)."""

from django.contrib.staticfiles.storage import staticfiles_storage
from django.http import HttpResponsePermanentRedirect
from whitenoise.storage import CompressedManifestStaticFilesStorage


class StaticFilesStorage(CompressedManifestStaticFilesStorage):
    """WhiteNoise's manifest storage that answers a file missing from the manifest with its plain name instead of
    an error: nothing collected yet, or a file added since the last collectstatic."""

    manifest_strict = False

    def stored_name(self, name):
        if self.hashed_files.get(self.hash_key(self.clean_name(name))) is None:
            return name
        return super().stored_name(name)


def favicon(request):
    """/favicon.ico, which browsers ask for on pages that name no icon (the API's, a 500): the portal's icon."""
    return HttpResponsePermanentRedirect(staticfiles_storage.url("favicon.svg"))
