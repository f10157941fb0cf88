from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("core", "0003_signin_lock_actions"),
    ]

    operations = [
        migrations.AlterField(
            model_name="auditentry",
            name="action",
            field=models.CharField(
                choices=[
                    ("create", "Created"),
                    ("update", "Updated"),
                    ("delete", "Deleted"),
                    ("start", "Started"),
                    ("cancel", "Cancel requested"),
                    ("approve", "Approved"),
                    ("dismiss", "Dismissed"),
                    ("clear", "Cleared"),
                    ("test", "Test sent"),
                    ("test_delivered", "Test delivered"),
                    ("test_failed", "Test failed"),
                    ("login", "Logged in"),
                    ("logout", "Logged out"),
                    ("login_failed", "Failed login"),
                    ("lock", "Sign-in locked"),
                    ("unlock", "Sign-in lock lifted"),
                ],
                max_length=16,
            ),
        ),
    ]
