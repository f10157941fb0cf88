"""Rackpilot settings. Every value comes from the environment (see docs/configuration.md).

Two wirings share this file: *embedded* (no DATABASE_URL / REDIS_URL: SQLite under var/, in-memory broker and
channel layer, a Celery worker inside the server process) and *services* (PostgreSQL, Redis, separate processes).
"""

import base64
import importlib.util
import os
import secrets
import tempfile
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

from portal.env import SQLITE_OPTIONS, database_from_url, env_bool, env_float, env_int, env_list, env_str

BASE_DIR = Path(__file__).resolve().parent.parent

# A test session (pytest sets PYTEST_VERSION while it runs) never reads what `make run` left in var/ (collected
# static files, a database, keys): it gets a folder of its own, which its xdist workers and the servers and workers
# it starts inherit; tests/conftest.py removes it at the end.
VAR_DIR_TEMPORARY = not env_str("RACKPILOT_VAR_DIR") and bool(env_str("PYTEST_VERSION"))
if VAR_DIR_TEMPORARY:
    os.environ["RACKPILOT_VAR_DIR"] = tempfile.mkdtemp(prefix="rackpilot-test-var-")
VAR_DIR = Path(env_str("RACKPILOT_VAR_DIR", str(BASE_DIR / "var")))

DATABASE_URL = env_str("DATABASE_URL")
REDIS_URL = env_str("REDIS_URL")
EMBEDDED = not REDIS_URL

DEBUG = env_bool("RACKPILOT_DEBUG", False)


def _secret_key() -> str:
    key = env_str("RACKPILOT_SECRET_KEY")
    if key:
        return key
    if not EMBEDDED:
        raise ImproperlyConfigured("RACKPILOT_SECRET_KEY must be set when REDIS_URL is (the services wiring)")
    # Embedded (single-process) installs keep a random key of their own, so nothing secret ships in the code.
    key_file = VAR_DIR / "secret_key"
    if not key_file.exists():
        VAR_DIR.mkdir(parents=True, exist_ok=True)
        key_file.write_text(secrets.token_urlsafe(50))
        key_file.chmod(0o600)
    return key_file.read_text().strip()


SECRET_KEY = _secret_key()


def _secrets_keys() -> list[str]:
    """Fernet keys for secrets stored in the database (apps/core/secrets.py); the first one encrypts."""
    keys = env_list("RACKPILOT_SECRETS_KEY", [])
    if keys:
        return keys
    if not EMBEDDED:
        raise ImproperlyConfigured("RACKPILOT_SECRETS_KEY must be set when REDIS_URL is (the services wiring)")
    key_file = VAR_DIR / "secrets_key"
    if not key_file.exists():
        VAR_DIR.mkdir(parents=True, exist_ok=True)
        key_file.write_text(base64.urlsafe_b64encode(secrets.token_bytes(32)).decode())
        key_file.chmod(0o600)
    return [key_file.read_text().strip()]


RACKPILOT_SECRETS_KEYS = _secrets_keys()
# Signs downloadable reports (apps/core/signing.py); unset, a key is generated into VAR_DIR on first use.
RACKPILOT_SIGNING_KEY = env_str("RACKPILOT_SIGNING_KEY")
ALLOWED_HOSTS = env_list("RACKPILOT_ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]"])
CSRF_TRUSTED_ORIGINS = env_list("RACKPILOT_CSRF_TRUSTED_ORIGINS", [])
# Websockets are accepted from the portal's own origin (scheme, host and port of the request) and from these
# (`https://rackpilot.example.org`), e.g. a page served under another name than the one the portal sees.
RACKPILOT_ALLOWED_ORIGINS = env_list("RACKPILOT_ALLOWED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "channels",
    "portal",  # the wiring's own commands (serve)
    "apps.core",
    "apps.accounts",
    "apps.inventory",
    "apps.topology",
    "apps.nodeexec",
    "apps.jobs",
    "apps.simulator",
    "apps.workloads",
    "apps.health",
    "apps.remediation",
    "apps.discovery",
    "apps.schedulers",
    "apps.deployments",
    "apps.diagnosis",
    "apps.benchmarks",
    "apps.monitoring",
    "apps.costs",
    "apps.tokens",
    "django_celery_beat",
    "apps.automation",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "apps.core.middleware.AuditContextMiddleware",
    "apps.core.middleware.ReadScopeMiddleware",
]

ROOT_URLCONF = "portal.urls"
ASGI_APPLICATION = "portal.asgi.application"
WSGI_APPLICATION = None

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "apps.core.navigation.navigation",
            ],
        },
    },
]

if DATABASE_URL:
    DATABASES = {
        "default": database_from_url(DATABASE_URL, conn_max_age=env_int("RACKPILOT_DB_CONN_MAX_AGE", 60)),
    }
else:
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": VAR_DIR / "rackpilot.sqlite3",
            "OPTIONS": dict(SQLITE_OPTIONS),
            # Tests use a file (one per test run), so a Celery worker process can share the test database.
            "TEST": {"NAME": env_str("RACKPILOT_TEST_DB", str(VAR_DIR / f"test-{os.getpid()}.sqlite3"))},
        }
    }
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_USER_MODEL = "accounts.User"
LOGIN_URL = "login"
# Every password check refuses a locked-out account name or address (apps/accounts/lockout.py).
AUTHENTICATION_BACKENDS = ["apps.accounts.backends.LockingModelBackend"]
# Sign-in lockout: this many failures for one account name, or from one address, within the window lock it for
# RACKPILOT_SIGNIN_LOCKOUT_SECONDS (0 turns that limit off). An admin lifts a lock early (admin, signin_unlock).
RACKPILOT_SIGNIN_MAX_FAILURES = env_int("RACKPILOT_SIGNIN_MAX_FAILURES", 5)
RACKPILOT_SIGNIN_MAX_FAILURES_PER_ADDRESS = env_int("RACKPILOT_SIGNIN_MAX_FAILURES_PER_ADDRESS", 20)
RACKPILOT_SIGNIN_WINDOW_SECONDS = env_int("RACKPILOT_SIGNIN_WINDOW_SECONDS", 900)
RACKPILOT_SIGNIN_LOCKOUT_SECONDS = env_int("RACKPILOT_SIGNIN_LOCKOUT_SECONDS", 900)
LOGIN_REDIRECT_URL = "dashboard"
LOGOUT_REDIRECT_URL = "login"
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator", "OPTIONS": {"min_length": 10}},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
FORMAT_MODULE_PATH = ["apps.core.formats"]  # dates and times as the tables print them, on every page
TIME_ZONE = env_str("RACKPILOT_TIME_ZONE", "UTC")
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "static"
STATIC_ROOT.mkdir(parents=True, exist_ok=True)  # WhiteNoise also serves collected files from here
# Plotly's JS comes from the Python package itself, not a CDN: operators' networks are often closed.
_PLOTLY_DIR = Path(importlib.util.find_spec("plotly").submodule_search_locations[0]) / "package_data"
STATICFILES_DIRS = [BASE_DIR / "static", ("vendor/plotly", _PLOTLY_DIR)]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    # Hashed names (cached for good) and gzip copies once collected; plain names before (portal/staticfiles.py).
    "staticfiles": {"BACKEND": "portal.staticfiles.StaticFilesStorage"},
}
# Serve straight from the app and static/ folders too, so a checkout works before collectstatic has run.
WHITENOISE_USE_FINDERS = True

# Security: on unless running over plain HTTP on purpose (make run, tests).
SECURE_SSL_REDIRECT = env_bool("RACKPILOT_SECURE_SSL_REDIRECT", False)
SESSION_COOKIE_SECURE = env_bool("RACKPILOT_SECURE_COOKIES", False)
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
SECURE_HSTS_SECONDS = env_int("RACKPILOT_HSTS_SECONDS", 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = SECURE_HSTS_SECONDS > 0
SECURE_HSTS_PRELOAD = SECURE_HSTS_SECONDS > 0
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https") if env_bool("RACKPILOT_BEHIND_PROXY") else None
X_FRAME_OPTIONS = "DENY"

# The longest lifetime a user may give an API token on the API tokens page (tokens/); legacy tokens migrated from
# DRF's authtoken table got this lifetime from the migration's day.
RACKPILOT_API_TOKEN_MAX_DAYS = env_int("RACKPILOT_API_TOKEN_MAX_DAYS", 365)
if RACKPILOT_API_TOKEN_MAX_DAYS < 1:
    raise ImproperlyConfigured("RACKPILOT_API_TOKEN_MAX_DAYS must be at least 1.")

REST_FRAMEWORK = {
    # Token first, so an anonymous API call gets 401 with a WWW-Authenticate header rather than 403.
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "apps.tokens.authentication.ApiTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["apps.accounts.permissions.RolePermission"],
    "DEFAULT_PARSER_CLASSES": [
        "apps.core.parsers.BoundedJSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "DEFAULT_PAGINATION_CLASS": "apps.core.pagination.BoundedLimitOffsetPagination",
    "PAGE_SIZE": 50,
    "DEFAULT_FILTER_BACKENDS": [
        "apps.core.filters.KnownQueryParameters",
        "django_filters.rest_framework.DjangoFilterBackend",
        "apps.core.filters.DocumentedSearchFilter",
        "apps.core.filters.ListOrderingFilter",
    ],
    "DEFAULT_SCHEMA_CLASS": "apps.core.openapi.AutoSchema",
    # A quantity is a JSON number (`"capacity_tb": 200.0`), as integers and floats are, never a string of digits.
    "COERCE_DECIMAL_TO_STRING": False,
    "EXCEPTION_HANDLER": "apps.core.api.exception_handler",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Rackpilot API",
    "DESCRIPTION": "Inventory, topology, jobs and acceptance checks of AI GPU clusters.",
    "VERSION": "0.1.0",
    "SERVE_INCLUDE_SCHEMA": False,
    # The schema and Swagger UI map every endpoint of the cluster's API: signed-in users only, like the API itself.
    "SERVE_PERMISSIONS": ["rest_framework.permissions.IsAuthenticated"],
    "COMPONENT_SPLIT_REQUEST": True,
    # Swagger UI's files come from the sidecar package: operators' networks are often closed to CDNs.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # Every operation's error answers (401/403, 400 with field errors, 404, 409) are documented in one place.
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "apps.core.schema.add_error_responses",
        "apps.core.schema.document_json_bodies",
        "apps.inventory.api.transfer_views.require_import_body",
    ],
    "ENUM_NAME_OVERRIDES": {
        "JobStatusEnum": "apps.jobs.choices.JobStatus",
        "JobKindEnum": "apps.jobs.kinds.startable_kind_names",  # a job's kind and a job template's: one enum
        "JobStepStatusEnum": "apps.jobs.choices.StepStatus",
        "JobTransportEnum": "apps.nodeexec.transports.TRANSPORT_CHOICES",
        "NodeStatusEnum": "apps.inventory.choices.NodeStatus",
        "NicTransportEnum": "apps.inventory.choices.NicTransport",
        "OutcomeEnum": "apps.benchmarks.choices.Verdict",  # the same four values as deployments' Outcome
        "BenchmarkPurposeEnum": "apps.benchmarks.choices.Purpose",
        "NicPurposeEnum": "apps.inventory.choices.NicPurpose",
        "BenchmarkTransportEnum": "apps.benchmarks.choices.BENCHMARK_TRANSPORTS",
        "CostPolicyKindEnum": "apps.costs.choices.PolicyKind",
        "WorkloadKindEnum": "apps.monitoring.choices.WORKLOAD_KINDS",  # GPU-hours rows and spot plan rows
        "SuiteEnum": "apps.benchmarks.choices.Suite",
        "NodeSuiteEnum": ["burn-in", "hpl-mxp", "nvbandwidth"],
        "HealthEventSourceEnum": "apps.health.choices.Source",  # the node-benchmark kind's (benchmarks' NODE_SUITES)
        "HealthSeverityEnum": "apps.health.choices.Severity",  # an event's severity and a policy's minimum
        "HealthComponentTypeEnum": "apps.health.choices.ComponentType",  # events, reliability rows, their filters
        "NodeHealthStateEnum": "apps.inventory.choices.HealthState",  # a node's stored state, fleet health's state
        "RemediationActionEnum": "apps.remediation.choices.Action",
        "RepairGateKindEnum": "apps.remediation.choices.GateKind",  # a repair's gate and each try of it
        "RepairPartTypeEnum": "apps.remediation.choices.PartType",
    },
}

if REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            # The default capacity of 100 drops messages silently under a busy job (see DESIGN.md).
            # A Redis that went away is noticed within seconds (connect timeout, keepalive), not minutes.
            "CONFIG": {
                "hosts": [{"address": REDIS_URL, "socket_connect_timeout": 5, "socket_keepalive": True}],
                "capacity": env_int("RACKPILOT_CHANNEL_CAPACITY", 1500),
            },
        }
    }
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}

CELERY_BROKER_URL = REDIS_URL or "memory://"
# A Redis restart costs at most the seconds it is down: the worker retries the broker forever (Celery's default
# gives up after 100 tries and the worker exits), at start-up too, and does not cancel the shards it runs when the
# connection drops (Celery 6 will by default): a shard's commands on nodes are not re-runnable, and its acks_late
# message, restored to the queue, finds the shard claimed and does nothing (docs/jobs.md). Workers run
# --without-gossip --without-mingle --without-heartbeat (docker/compose.yaml, Makefile): Rackpilot uses none of
# them, and Celery's gossip step breaks when it restarts after a lost connection.
CELERY_BROKER_CONNECTION_RETRY = True
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BROKER_CONNECTION_MAX_RETRIES = None
CELERY_WORKER_CANCEL_LONG_RUNNING_TASKS_ON_CONNECTION_LOSS = False
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TIMEZONE = TIME_ZONE
# Two queues: `jobs` (shards: long, many) and `system` (the reaper, pruning, deployments settle: short, few), each
# served by its own workers (`-Q jobs`, `-Q system --concurrency 1`), so 500 queued shards never hold up the reaper.
# A worker started without -Q consumes both (the embedded wiring, tests); a task nobody routed goes to `jobs`.
CELERY_TASK_DEFAULT_QUEUE = "jobs"
CELERY_TASK_QUEUES = {
    "jobs": {"exchange": "jobs", "routing_key": "jobs"},
    "system": {"exchange": "system", "routing_key": "system"},
}

CACHES = {
    "default": (
        {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": REDIS_URL}
        if REDIS_URL
        else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}
    )
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env_str("RACKPILOT_LOG_LEVEL", "INFO")},
}

# Inventory imports larger than this many bytes run in the background as a job (docs/inventory.md).
RACKPILOT_IMPORT_BACKGROUND_BYTES = env_int("RACKPILOT_IMPORT_BACKGROUND_BYTES", 256 * 1024)

# Jobs engine (apps/jobs, apps/nodeexec): see docs/jobs.md.
# The embedded wiring is for trying Rackpilot out on the demo cluster: its jobs go to the simulator unless told.
RACKPILOT_JOB_DEFAULT_TRANSPORT = env_str("RACKPILOT_JOB_DEFAULT_TRANSPORT", "sim" if EMBEDDED else "ssh")
# Which scheduler a scheduler-action job drains a node in when it names none: kubernetes or slurm.
RACKPILOT_SCHEDULER_KIND = env_str("RACKPILOT_SCHEDULER_KIND", "kubernetes")
# The node kubectl / scontrol run on (host name); empty: the first management node.
RACKPILOT_SCHEDULER_CONTROLLER = env_str("RACKPILOT_SCHEDULER_CONTROLLER", "")
# The transports this install allows: an install with no business running commands on its own host drops `local`.
RACKPILOT_JOB_TRANSPORTS = env_list("RACKPILOT_JOB_TRANSPORTS", ["ssh", "local", "sim"])
RACKPILOT_JOB_WINDOW = env_int("RACKPILOT_JOB_WINDOW", 64)
RACKPILOT_JOB_SHARD_SIZE = env_int("RACKPILOT_JOB_SHARD_SIZE", 256)
RACKPILOT_JOB_KILL_GRACE_SECONDS = env_int("RACKPILOT_JOB_KILL_GRACE_SECONDS", 3)
RACKPILOT_JOB_CANCEL_POLL_SECONDS = env_int("RACKPILOT_JOB_CANCEL_POLL_MS", 500) / 1000
# A SIGKILLed worker is seen as lost within STALE + REAPER seconds (20 + 5 = 25 s): a running shard beats every
# RACKPILOT_JOB_CANCEL_POLL_MS (0.5 s), so 20 s is 40 missed beats, and a busy database has room to breathe.
RACKPILOT_JOB_STALE_SECONDS = env_int("RACKPILOT_JOB_STALE_SECONDS", 20)
RACKPILOT_JOB_REAPER_SECONDS = env_int("RACKPILOT_JOB_REAPER_SECONDS", 5)
# A lost worker's shard of a kind that may run twice (JobKind.rerun_on_worker_loss) is re-queued up to this many
# times; after that, or for any other kind, it ends "worker lost". A re-queued shard that no worker claims within
# RACKPILOT_JOB_REQUEUE_WAIT_SECONDS ends "worker lost" too: a job never stays running with no worker to run it.
RACKPILOT_JOB_WORKER_LOSS_RERUNS = env_int("RACKPILOT_JOB_WORKER_LOSS_RERUNS", 2)
RACKPILOT_JOB_REQUEUE_WAIT_SECONDS = env_int("RACKPILOT_JOB_REQUEUE_WAIT_SECONDS", 600)
# Celery beat's process also runs the reaper itself, in a thread (portal/celery.py): with every worker dead, jobs
# still end. Off only for a second beat-like process that must not.
RACKPILOT_BEAT_REAPER = env_bool("RACKPILOT_BEAT_REAPER", True)
RACKPILOT_JOB_TIME_LIMIT = env_int("RACKPILOT_JOB_TIME_LIMIT", 6 * 3600)
RACKPILOT_JOB_RETENTION_DAYS = env_int("RACKPILOT_JOB_RETENTION_DAYS", 30)
RACKPILOT_JOB_EVENT_LINES_PER_STEP = env_int("RACKPILOT_JOB_EVENT_LINES_PER_STEP", 200)
RACKPILOT_ARTIFACT_MAX_BYTES = env_int("RACKPILOT_ARTIFACT_MAX_BYTES", 1 << 20)
# ~100 ms batches: what delivered every event with a p99 under 250 ms here (DESIGN.md, bench/events.py).
RACKPILOT_EVENT_FLUSH_MS = env_int("RACKPILOT_EVENT_FLUSH_MS", 100)
RACKPILOT_SSH_USER = env_str("RACKPILOT_SSH_USER", "root")
RACKPILOT_SSH_KEY = env_str("RACKPILOT_SSH_KEY", "")
RACKPILOT_SSH_CONNECT_TIMEOUT = env_int("RACKPILOT_SSH_CONNECT_TIMEOUT", 20)
# The simulated cluster's noise seed: the same seed gives the same figures (apps/simulator).
RACKPILOT_SIM_SEED = env_int("RACKPILOT_SIM_SEED", 0)
# How long a simulated `systemctl reboot` keeps a node off the network (±20 % per node and boot, seeded).
RACKPILOT_SIM_REBOOT_SECONDS = env_float("RACKPILOT_SIM_REBOOT_SECONDS", 8.0)
# Simulated nccl-tests take the model's time and print each row as it would (demos; the run page's live plot test).
RACKPILOT_SIM_REAL_TIME = env_bool("RACKPILOT_SIM_REAL_TIME", False)

# Telemetry (docs/monitoring.md, "Telemetry" and "Prometheus"): with no Prometheus URL, pages read the simulator
# directly (the embedded wiring).
RACKPILOT_PROMETHEUS_URL = env_str("RACKPILOT_PROMETHEUS_URL", "")
RACKPILOT_PROMETHEUS_TIMEOUT_SECONDS = env_int("RACKPILOT_PROMETHEUS_TIMEOUT_SECONDS", 5)
RACKPILOT_PROMETHEUS_ALLOW_LINK_LOCAL = env_bool("RACKPILOT_PROMETHEUS_ALLOW_LINK_LOCAL", False)
RACKPILOT_PROMETHEUS_TARGETS_DIR = env_str("RACKPILOT_PROMETHEUS_TARGETS_DIR", str(VAR_DIR / "prometheus" / "targets"))
RACKPILOT_SIM_EXPORTERS = env_str("RACKPILOT_SIM_EXPORTERS", "127.0.0.1:9400")  # host:port Prometheus scrapes

# BMC readings (docs/monitoring.md): every site's BMCs are read every RACKPILOT_BMC_POLL_SECONDS unless the site has
# its own schedule; beat looks for sites that are due every RACKPILOT_BMC_SCHEDULER_SECONDS.
RACKPILOT_BMC_POLL_SECONDS = env_int("RACKPILOT_BMC_POLL_SECONDS", 60)
RACKPILOT_BMC_SCHEDULER_SECONDS = env_int("RACKPILOT_BMC_SCHEDULER_SECONDS", 15)
# The BMCs' event logs (SEL) are read every RACKPILOT_BMC_SEL_SECONDS; their new records become health events.
RACKPILOT_BMC_SEL_SECONDS = env_int("RACKPILOT_BMC_SEL_SECONDS", 300)
# Training progress (docs/monitoring.md): each active training job's log is read for step lines this often.
RACKPILOT_TRAINING_PROGRESS_SECONDS = env_int("RACKPILOT_TRAINING_PROGRESS_SECONDS", 60)
# How often the scheduler's node states are read back from the controller (RACKPILOT_SCHEDULER_KIND's scheduler).
RACKPILOT_SCHEDULER_READBACK_SECONDS = env_int("RACKPILOT_SCHEDULER_READBACK_SECONDS", 300)
# What a training job's paths may name on a node (apps/nodeexec/catalogue.confine): the log that training progress
# and the runbooks tail, the checkpoints that recovery lists, hashes, loads and prunes. Nothing outside is read.
RACKPILOT_TRAINING_LOG_DIRS = env_list("RACKPILOT_TRAINING_LOG_DIRS", ["/var/log/train", "/var/log/training", "/logs"])
RACKPILOT_CHECKPOINT_DIRS = env_list(
    "RACKPILOT_CHECKPOINT_DIRS", ["/checkpoints", "/ckpt", "/shared/ckpt", "/scratch/ckpt", "/data"]
)
RACKPILOT_BMC_RETENTION_DAYS = env_int("RACKPILOT_BMC_RETENTION_DAYS", 7)
RACKPILOT_BMC_TIMEOUT_SECONDS = env_int("RACKPILOT_BMC_TIMEOUT_SECONDS", 10)
# The transport the schedule's reads run over: `local` (ipmitool and HTTP from the worker's host) or `sim`; empty:
# the job default when bmc-poll runs over it, else `local` (apps.nodeexec.transports.default_transport).
RACKPILOT_BMC_TRANSPORT = env_str("RACKPILOT_BMC_TRANSPORT", "")
# The simulated BMCs' one account (apps/simulator/bmc.py): any other login is refused, as a real BMC would.
RACKPILOT_SIM_BMC_USER = env_str("RACKPILOT_SIM_BMC_USER", "admin")
RACKPILOT_SIM_BMC_PASSWORD = env_str("RACKPILOT_SIM_BMC_PASSWORD", "rackpilot-sim")
# Remediation (docs/health.md, "Maintenance windows"): a non-critical disruptive action on a node whose maintenance
# window (its own or its rack's) opens within this many hours is deferred into it; none booked: it acts at once.
RACKPILOT_MAINTENANCE_DEFER_HOURS = env_int("RACKPILOT_MAINTENANCE_DEFER_HOURS", 72)
# Outbound calls (BMCs) refuse link-local and cloud metadata addresses unless this is on (apps/core/outbound.py).
RACKPILOT_OUTBOUND_ALLOW_LINK_LOCAL = env_bool("RACKPILOT_OUTBOUND_ALLOW_LINK_LOCAL", False)
# Cost and energy policies (docs/costs.md): the price a saving is shown at, in
# RACKPILOT_ENERGY_CURRENCY per kWh, and how often beat evaluates every enabled policy.
RACKPILOT_ENERGY_PRICE_PER_KWH = env_float("RACKPILOT_ENERGY_PRICE_PER_KWH", 0.15)
RACKPILOT_ENERGY_CURRENCY = env_str("RACKPILOT_ENERGY_CURRENCY", "EUR")
RACKPILOT_POLICY_EVALUATION_SECONDS = env_int("RACKPILOT_POLICY_EVALUATION_SECONDS", 300)
# Storage tiering: what a TB held on each storage tier draws (W), the drives at their active power with their share
# of the servers that hold them (docs/costs.md, "Storage tiering", says where the defaults come from).
RACKPILOT_STORAGE_WATTS_PER_TB = {
    "hot": env_float("RACKPILOT_STORAGE_HOT_WATTS_PER_TB", 5.0),
    "warm": env_float("RACKPILOT_STORAGE_WARM_WATTS_PER_TB", 2.0),
    "cold": env_float("RACKPILOT_STORAGE_COLD_WATTS_PER_TB", 0.5),
}
if any(watts < 0 for watts in RACKPILOT_STORAGE_WATTS_PER_TB.values()):
    raise ImproperlyConfigured("RACKPILOT_STORAGE_*_WATTS_PER_TB must not be negative")
if RACKPILOT_ENERGY_PRICE_PER_KWH < 0:
    raise ImproperlyConfigured("RACKPILOT_ENERGY_PRICE_PER_KWH must not be negative")
if RACKPILOT_POLICY_EVALUATION_SECONDS < 30:
    raise ImproperlyConfigured("RACKPILOT_POLICY_EVALUATION_SECONDS must be at least 30")
# /metrics: empty answers anyone (like most exporters; it shows no credentials or host secrets); set, it wants
# `Authorization: Bearer <token>` (Prometheus' `authorization` scrape setting).
RACKPILOT_METRICS_TOKEN = env_str("RACKPILOT_METRICS_TOKEN", "")
# acks_late run_shard tasks are redelivered after the visibility timeout: keep it above the longest shard, and the
# shard's conditional claim makes a redelivery a no-op anyway.
# Socket timeouts and keepalive: a Redis that vanished without closing its sockets (host down, network cut) is
# noticed in seconds, not after the kernel's TCP timeout.
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "visibility_timeout": RACKPILOT_JOB_TIME_LIMIT + 3600,
    "socket_connect_timeout": 5,
    "socket_timeout": 30,
    "socket_keepalive": True,
    "health_check_interval": 25,
    "retry_on_timeout": True,
}
# How often new job events are scanned for notifications.
RACKPILOT_NOTIFY_SCAN_SECONDS = env_int("RACKPILOT_NOTIFY_SCAN_SECONDS", 15)

# The periodic work, one table: task name -> period in seconds. Beat sends each task this often (CELERY_BEAT_SCHEDULE,
# built from it) and the embedded server's loop runs the same task in its own process as often (portal/embedded.py);
# each goes to the system queue. Periodic work is added by a line here, for both wirings.
RACKPILOT_PERIODIC_TASKS = {
    "rackpilot.jobs.reap": RACKPILOT_JOB_REAPER_SECONDS,
    "rackpilot.jobs.prune": 3600,
    "rackpilot.deployments.settle": 60,
    "rackpilot.monitoring.poll_bmcs": RACKPILOT_BMC_SCHEDULER_SECONDS,
    "rackpilot.monitoring.prune_bmc_readings": 3600,
    "rackpilot.monitoring.read_bmc_sels": RACKPILOT_BMC_SEL_SECONDS,  # the BMCs' event logs → health events
    "rackpilot.automation.scan_events": RACKPILOT_NOTIFY_SCAN_SECONDS,
    "rackpilot.monitoring.read_training_progress": RACKPILOT_TRAINING_PROGRESS_SECONDS,
    "rackpilot.costs.evaluate_cost_policies": RACKPILOT_POLICY_EVALUATION_SECONDS,
    "rackpilot.monitoring.record_telemetry": 60,
    "rackpilot.schedulers.readback": RACKPILOT_SCHEDULER_READBACK_SECONDS,
    "rackpilot.topology.record": 60,  # what a bulk update changed (a saved change is recorded on commit)
    # GPU faults the telemetry shows (XID, ECC, row remap, slowdowns, PCIe, missing GPUs) → health events: every 30 s,
    # so that one shows within a minute of the fault (docs/health.md, "Producers")
    "rackpilot.monitoring.watch_telemetry": 30,
    "rackpilot.monitoring.read_kernel_logs": 300,  # each compute node's Xid and PCIe AER lines → health events
    "rackpilot.remediation.evaluate": 60,  # open health events → the remediation policies' decisions
    "rackpilot.diagnosis.watch_training": 60,  # a training job's hang or slowdown → an incident on its runbook
}
CELERY_BEAT_SCHEDULE = {
    name.replace(".", "-").replace("_", "-"): {"task": name, "schedule": float(period)}
    for name, period in RACKPILOT_PERIODIC_TASKS.items()
}
SYSTEM_TASKS = (*RACKPILOT_PERIODIC_TASKS, "rackpilot.automation.run_schedule", "rackpilot.automation.deliver")
CELERY_TASK_ROUTES = {
    "rackpilot.jobs.run_shard": {"queue": "jobs"},
    **{name: {"queue": "system"} for name in SYSTEM_TASKS},
}

# Log triage (apps/diagnosis): the largest log a page or API upload may send; a pasted log must fit Django's limit too.
RACKPILOT_TRIAGE_MAX_BYTES = env_int("RACKPILOT_TRIAGE_MAX_BYTES", 5 << 20)
# After a fix, how long the re-check waits for the training log to show progress again.
RACKPILOT_DIAGNOSIS_VERIFY_WAIT_SECONDS = env_int("RACKPILOT_DIAGNOSIS_VERIFY_WAIT_SECONDS", 180)
DATA_UPLOAD_MAX_MEMORY_SIZE = max(2621440, RACKPILOT_TRIAGE_MAX_BYTES + (64 << 10))

# Automation (docs/automation.md): beat keeps its schedule in the database (django-celery-beat), where job-template
# schedules are PeriodicTask rows; the fixed entries above are copied there when beat starts.
CELERY_BEAT_SCHEDULER = "django_celery_beat.schedulers:DatabaseScheduler"
DJANGO_CELERY_BEAT_TZ_AWARE = True
# Fleet health is judged for notifications at most this often (it reads the telemetry of every compute node).
RACKPILOT_NOTIFY_HEALTH_SECONDS = env_int("RACKPILOT_NOTIFY_HEALTH_SECONDS", 60)
# Webhooks: never to loopback, link-local, private or metadata addresses (checked when saved and at each send,
# after resolving the name) unless this is on; a timeout per attempt and bounded retries with backoff.
RACKPILOT_WEBHOOK_ALLOW_PRIVATE = env_bool("RACKPILOT_WEBHOOK_ALLOW_PRIVATE", False)
RACKPILOT_WEBHOOK_TIMEOUT_SECONDS = env_int("RACKPILOT_WEBHOOK_TIMEOUT_SECONDS", 5)
RACKPILOT_WEBHOOK_MAX_ATTEMPTS = env_int("RACKPILOT_WEBHOOK_MAX_ATTEMPTS", 4)
RACKPILOT_WEBHOOK_RETRY_SECONDS = env_int("RACKPILOT_WEBHOOK_RETRY_SECONDS", 30)
# E-mail notifications go through Django's e-mail backend.
EMAIL_BACKEND = env_str("RACKPILOT_EMAIL_BACKEND", "django.core.mail.backends.smtp.EmailBackend")
EMAIL_HOST = env_str("RACKPILOT_EMAIL_HOST", "localhost")
EMAIL_PORT = env_int("RACKPILOT_EMAIL_PORT", 25)
EMAIL_HOST_USER = env_str("RACKPILOT_EMAIL_USER", "")
EMAIL_HOST_PASSWORD = env_str("RACKPILOT_EMAIL_PASSWORD", "")
EMAIL_USE_TLS = env_bool("RACKPILOT_EMAIL_USE_TLS", False)
EMAIL_USE_SSL = env_bool("RACKPILOT_EMAIL_USE_SSL", False)
EMAIL_TIMEOUT = env_int("RACKPILOT_EMAIL_TIMEOUT_SECONDS", 10)
DEFAULT_FROM_EMAIL = env_str("RACKPILOT_EMAIL_FROM", "rackpilot@localhost")
# Links in notifications: the portal's address as people reach it (empty: links are paths).
RACKPILOT_BASE_URL = env_str("RACKPILOT_BASE_URL", "")
