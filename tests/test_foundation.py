"""The skeleton: real Postgres + pgvector, real Redis + Celery, login everywhere, /healthz."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from django.core.management import call_command
from django.db import connection
from django.test import override_settings
from django.urls import reverse

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.django_db
def test_database_is_postgres_with_pgvector():
    assert connection.vendor == "postgresql"
    with connection.cursor() as cursor:
        cursor.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
        row = cursor.fetchone()
        assert row is not None, "the vector extension must be enabled by the first migration"
        cursor.execute("SELECT '[1,2,3]'::vector <=> '[1,2,3]'::vector")
        assert cursor.fetchone()[0] == pytest.approx(0.0)


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_celery_task_round_trips_through_real_worker(celery_worker, settings):
    from memory.models import Memory
    from memory.services import bank_create, memory_create
    from memory.tasks import reembed_memory_task

    assert not settings.CELERY_TASK_ALWAYS_EAGER
    memory = memory_create(bank=bank_create(name="round trip"), content="The lighthouse keeper waves.")
    Memory.objects.filter(pk=memory.pk).update(embedding_stale=True)
    result = reembed_memory_task.delay(memory.pk)
    assert result.get(timeout=60) is True
    # It ran in the worker process, not here: the result came back through Redis, the row changed.
    assert result.backend.__class__.__name__ == "RedisBackend"
    memory.refresh_from_db()
    assert not memory.embedding_stale
    assert celery_worker.proc.poll() is None


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_healthz_all_up(celery_worker, client):
    from tests.chronicle.simulation.conftest import wait_for

    # A pool process stamps its heartbeat once its model is warm, a moment after the worker answers pings.
    response = wait_for(lambda: (r := client.get("/healthz")).status_code == 200 and r, timeout=30, what="healthz ok")
    body = response.json()
    assert body["status"] == "ok"
    parts = body["parts"]
    assert parts["database"]["pgvector"].count(".") >= 1
    assert parts["redis"]["ok"]
    assert celery_worker.name.replace("%h", "").rstrip("@") in " ".join(parts["worker"]["workers"])
    assert parts["worker"]["processes"] >= 1
    assert parts["embedding"]["dimension"] == 384
    assert parts["embedding"]["model"] == "all-MiniLM-L6-v2"


@pytest.mark.django_db
def test_healthz_reads_the_pool_from_its_stamps_not_a_round_trip_to_a_worker(client):
    """The worker part of /healthz is the pool processes' stamps in Redis, read at once: a stamp with
    no worker behind it to answer a ping reads as a live process, named (a ping waited up to 1.5 s
    on every call and said "ok" while no child could run a task)."""
    from core.pool import PoolHeartbeat, _client

    stamp = PoolHeartbeat("stamp-only@nowhere")
    redis_client = _client()
    try:
        stamp.beat(redis_client)
        worker = client.get("/healthz").json()["parts"]["worker"]
        assert "stamp-only@nowhere" in " ".join(worker["workers"])
    finally:
        stamp.finish()
        redis_client.close()
    assert "stamp-only@nowhere" not in " ".join(client.get("/healthz").json()["parts"]["worker"].get("workers", []))


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_healthz_is_down_while_no_pool_process_can_run_tasks(django_db_setup, client, settings):
    """A worker that answers pings while none of its pool processes can run a task is down, not ok."""
    import signal

    from tests.chronicle.simulation.conftest import wait_for
    from tests.conftest import ARTIFACTS
    from core.workers import WorkerProcess
    from core import embedded

    # Its own Redis database, so that the suite's other workers do not answer for it.
    db = (int(settings.CELERY_BROKER_URL.rsplit("/", 1)[1] or 0) + 8) % 16
    worker = WorkerProcess("dark", 2, log_path=ARTIFACTS / "worker-dark.log",
                           env={"WONDA_REDIS_DB": str(db), "WONDA_POOL_HEARTBEAT_SECONDS": "1"})
    settings.CELERY_BROKER_URL = embedded.redis_url(db)
    settings.POOL_HEARTBEAT_SECONDS = 1
    try:
        wait_for(lambda: (r := client.get("/healthz")).status_code == 200 and r.json()["parts"]["worker"]["processes"] == 2,
                 timeout=90, what="both pool processes to report in")
        children = worker.children()
        for pid in children:  # hung children: alive, but no task can run on them
            os.kill(pid, signal.SIGSTOP)
        try:
            down = wait_for(lambda: (r := client.get("/healthz")).status_code == 503 and r.json(), timeout=10,
                            what="healthz to report the pool down")
            assert down["down"] == ["worker", "embedding"]
            assert "no worker process has been able to run tasks" in down["parts"]["worker"]["error"]
            assert worker.proc.poll() is None  # the worker itself is alive and answers pings: only its pool is dark
        finally:
            for pid in children:
                os.kill(pid, signal.SIGCONT)
        wait_for(lambda: client.get("/healthz").status_code == 200, timeout=10, what="healthz ok again")
    finally:
        worker.stop()


@pytest.mark.django_db
def test_healthz_names_redis_when_broker_unreachable(client):
    with override_settings(CELERY_BROKER_URL="redis://127.0.0.1:1/0"):
        response = client.get("/healthz")
    body = response.json()
    assert response.status_code == 503
    assert "redis" in body["down"]
    assert "unreachable" in body["parts"]["redis"]["error"]
    assert body["parts"]["database"]["ok"]


@pytest.mark.django_db
def test_anonymous_pages_redirect_to_login(client):
    for url in ["/", "/admin/"]:
        response = client.get(url)
        assert response.status_code == 302
        assert "login" in response["Location"]
    assert client.get(reverse("login")).status_code == 200


@pytest.mark.django_db
def test_login_then_home_then_logout(client, user):
    response = client.post(reverse("login"), {"username": "ada", "password": "correct-horse-1"}, follow=True)
    assert response.status_code == 200
    assert b"ada" in response.content
    response = client.post(reverse("logout"), follow=True)
    assert client.get("/").status_code == 302


@pytest.mark.django_db
def test_wrong_password_is_refused_with_a_message(client, user):
    response = client.post(reverse("login"), {"username": "ada", "password": "nope"})
    assert response.status_code == 200
    assert b"Please enter a correct username and password" in response.content


@pytest.mark.django_db
def test_non_staff_user_gets_no_admin(client_for, user, staff_user, client):
    response = client_for(user).get("/admin/")
    assert response.status_code == 302 and "/admin/login/" in response["Location"]
    client.force_login(staff_user)
    assert client.get("/admin/").status_code == 200


@pytest.mark.django_db
def test_check_and_migrations_are_clean():
    call_command("check", fail_level="WARNING")
    call_command("makemigrations", "--check", "--dry-run", verbosity=0)  # SystemExit(1) if models drifted


def test_docker_compose_is_valid():
    path = ROOT / "docker-compose.yml"
    docker = shutil.which("docker")
    if docker and subprocess.run([docker, "compose", "version"], capture_output=True).returncode == 0:
        result = subprocess.run([docker, "compose", "-f", str(path), "config", "--quiet"], capture_output=True, text=True,
                                env=os.environ | {"SECRET_KEY": "a-secret-the-operator-sets"})
        assert result.returncode == 0, result.stderr
    config = yaml.safe_load(path.read_text())
    services = config["services"]
    assert {"db", "redis", "web", "worker"} <= set(services)
    assert "pgvector" in services["db"]["image"]
    assert "gunicorn" in services["web"]["command"]
    assert "celery" in services["worker"]["command"]
    for name in ("web", "worker"):
        env = services[name]["environment"]
        assert "DATABASE_URL" in env and "CELERY_BROKER_URL" in env


def test_embedding_model_is_local_and_validated(settings):
    from memory.embedding import EmbeddingError, encode, validate_model

    vectors = encode(["who am I?", "where am I?"])
    assert vectors.shape == (2, 384)
    assert validate_model()["dimension"] == 384
    settings.EMBEDDING_DIM = 512
    with pytest.raises(EmbeddingError, match="makes 384-d vectors but WONDA_EMBEDDING_DIM is 512: set WONDA_EMBEDDING_DIM=384"):
        validate_model()


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_worker_registers_every_task_the_project_defines(celery_worker):
    """A task the worker doesn't know is silently lost work (an 'unregistered task' in its log)."""
    import importlib

    from wonda_site.celery import app

    for path in ROOT.glob("*/**/tasks.py"):
        if ".venv" in path.parts:
            continue
        importlib.import_module(".".join(path.relative_to(ROOT).with_suffix("").parts))
    defined = {name for name in app.tasks if not name.startswith("celery.")}
    assert {"memory.tasks.seed_bank_task", "chronicle.simulation.tasks.run_turn_task"} <= defined
    replies = app.control.inspect(timeout=5).registered() or {}
    registered = next(names for worker, names in replies.items() if celery_worker.name.split("@")[0] in worker)
    assert defined - set(registered) == set()


@pytest.mark.django_db
def test_production_404_is_wondas_page_not_a_url_list(client_for, user, settings):
    settings.DEBUG = False
    response = client_for(user).get("/simulations/999999/")
    body = response.content.decode()
    assert response.status_code == 404
    assert "Not found" in body and "Back to your characters" in body
    assert "URLconf" not in body and "simulations/&lt;int:pk&gt;" not in body


def test_docker_compose_runs_without_debug_and_needs_a_secret_key():
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    environment = compose["x-app"]["environment"]
    assert environment["DEBUG"] == "0"
    assert environment["SECRET_KEY"].startswith("${SECRET_KEY:?")


def _compose_defaults(compose: dict) -> dict[str, str]:
    """The app's environment as compose gives it when the operator sets nothing: ${X:-default} is
    its default, ${X:?message} (required) is left out."""
    env = {}
    for name, value in compose["x-app"]["environment"].items():
        found = re.fullmatch(r"\$\{\w+(:-|:\?)(.*)\}", str(value))
        if found is None:
            env[name] = str(value)
        elif found[1] == ":-":
            env[name] = found[2]
    return env


def test_compose_serves_plain_http_on_localhost_unless_asked_for_https():
    env = _compose_defaults(yaml.safe_load((ROOT / "docker-compose.yml").read_text()))
    assert env["WONDA_HTTPS"] == "0"  # no redirect to HTTPS, no HSTS pinned on localhost
    assert env["CSRF_TRUSTED_ORIGINS"].startswith("http://localhost")


def test_the_compose_configuration_restarts_what_dies_and_passes_check_deploy(tmp_path):
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    for name, service in compose["services"].items():
        restart = service.get("restart") or compose["x-app"].get("restart")
        assert restart == "unless-stopped" and service.get("healthcheck"), name
    # The environment compose gives the app behind TLS, with the secret an operator sets: no
    # deployment warning. Its database and broker are compose's own services, which the check never
    # reaches, and its var dir a temporary one: the check starts no server and writes nothing on the host.
    data = tmp_path / "data"
    env = _compose_defaults(compose) | {"WONDA_HTTPS": "1", "SECRET_KEY": "an-operator-set-secret-" + "x" * 40,
                                         "ALLOWED_HOSTS": "wonda.example", "WONDA_VAR_DIR": str(data)}
    assert env["DATABASE_URL"].startswith("postgres://") and env["CELERY_BROKER_URL"].startswith("redis://")
    result = subprocess.run([sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
                            cwd=ROOT, capture_output=True, text=True, timeout=120,
                            env={k: v for k, v in os.environ.items() if k != "DJANGO_ALLOW_ASYNC_UNSAFE"} | env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert not (data / "pg").exists() and not (data / "redis").exists()


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_the_tests_have_their_own_broker_database_and_queue(celery_worker, settings):
    """A developer's `make run` (Redis database 0, queue "celery") and `make test` share the embedded
    Redis: neither may take the other's tasks."""
    from wonda_site.celery import app

    assert settings.CELERY_BROKER_URL.rsplit("/", 1)[1] != "0"
    queues = app.control.inspect(timeout=5).active_queues() or {}
    consumed = {q["name"] for worker in queues.values() for q in worker}
    assert consumed == {"wonda-test"}, consumed
