"""DRF authtoken keys, stored in clear, become hashed API tokens that keep working: the same secret authenticates,
now with an expiry (RACKPILOT_API_TOKEN_MAX_DAYS from today). The clear keys are then deleted; undoing this
migration cannot bring them back."""

import hashlib
from datetime import timedelta

from django.conf import settings
from django.db import migrations
from django.utils import timezone


def hash_authtoken_keys(apps, schema_editor):
    Token = apps.get_model("authtoken", "Token")
    ApiToken = apps.get_model("tokens", "ApiToken")
    expires = timezone.now() + timedelta(days=settings.RACKPILOT_API_TOKEN_MAX_DAYS)
    for token in Token.objects.all():
        ApiToken.objects.create(
            user_id=token.user_id,
            name="Migrated from the admin's API token",
            prefix=token.key[:8],
            digest=hashlib.sha256(token.key.encode()).hexdigest(),
            expires=expires,
        )
    Token.objects.all().delete()


class Migration(migrations.Migration):
    dependencies = [
        ("tokens", "0001_initial"),
        ("authtoken", "0004_alter_tokenproxy_options"),
    ]

    operations = [migrations.RunPython(hash_authtoken_keys, migrations.RunPython.noop)]
