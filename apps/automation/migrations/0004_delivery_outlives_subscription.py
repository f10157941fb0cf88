# The delivery log outlives a subscription: deleting one leaves its deliveries (SET_NULL), under the name they were
# sent to; a test delivery names who sent it.

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


def name_the_deliveries(apps, schema_editor):
    Delivery = apps.get_model("automation", "Delivery")
    Subscription = apps.get_model("automation", "Subscription")
    for subscription in Subscription.objects.all():
        Delivery.objects.filter(subscription=subscription).update(subscription_name=subscription.name)


class Migration(migrations.Migration):
    dependencies = [
        ("automation", "0003_remediation_events"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name="delivery",
            name="subscription_name",
            field=models.CharField(default="", help_text="The subscription's name when this was sent.", max_length=100),
            preserve_default=False,
        ),
        migrations.RunPython(name_the_deliveries, migrations.RunPython.noop, elidable=True),
        migrations.AlterField(
            model_name="delivery",
            name="subscription",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="deliveries",
                to="automation.subscription",
            ),
        ),
        migrations.AddField(
            model_name="delivery",
            name="requested_by",
            field=models.ForeignKey(
                blank=True,
                help_text="Who asked for it (a test); none for an event's delivery.",
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="+",
                to=settings.AUTH_USER_MODEL,
            ),
        ),
    ]
