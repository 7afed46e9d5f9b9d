"""The LLM API key at rest: encrypted in PostgreSQL, plain to the worker, never in exports or logs."""

from __future__ import annotations

import importlib
import json
import logging
from types import SimpleNamespace

import pytest
from django.apps import apps
from django.core import serializers
from django.db import connection

from chronicle.simulation.run.models import Simulation
from chronicle.simulation.providers.openai_provider import OpenAIProvider
from chronicle.simulation.control.tasks import run_turn_task
from chronicle.writing import exports
from devtools.fake_llm import ok
from core import crypto
from tests import factories

KEY = "sk-live-supersecret-4f2a9c"
pytestmark = pytest.mark.django_db


def start(user, scenario, server, api_key=KEY) -> Simulation:
    return factories.start(user, scenario, server, api_key=api_key, max_turns=2)


def raw_column(simulation) -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT api_key FROM chronicle_simulation WHERE id = %s", [simulation.pk])
        return cursor.fetchone()[0]


def set_raw_column(simulation, value: str) -> None:
    with connection.cursor() as cursor:
        cursor.execute("UPDATE chronicle_simulation SET api_key = %s WHERE id = %s", [value, simulation.pk])


def test_the_column_holds_a_token_that_decrypts_to_the_key_and_the_model_reads_the_key(user, dinner, server):
    simulation = start(user, dinner, server)
    stored = raw_column(simulation)
    assert KEY not in stored and "supersecret" not in stored
    assert stored.startswith("gAAAAA")  # a Fernet token
    assert crypto.decrypt(stored) == KEY
    assert Simulation.objects.get(pk=simulation.pk).api_key == KEY
    assert Simulation.objects.values_list("api_key", flat=True).get(pk=simulation.pk) == KEY
    assert simulation.api_key_hint == "sk-…2a9c"


def test_a_500_character_key_fits(user, dinner, server):
    long_key = "sk-" + "x" * 497
    simulation = start(user, dinner, server, api_key=long_key)
    assert len(raw_column(simulation)) > 500
    assert Simulation.objects.get(pk=simulation.pk).api_key == long_key


def test_empty_stays_empty(user, dinner, server):
    simulation = start(user, dinner, server, api_key="")
    assert raw_column(simulation) == ""
    assert Simulation.objects.get(pk=simulation.pk).api_key == "" and simulation.api_key_hint == ""


def test_the_server_receives_the_plain_key_and_no_log_line_carries_it(user, dinner, server, caplog):
    simulation = Simulation.objects.get(pk=start(user, dinner, server).pk)
    server.script(ok("Hello."), ok("Dinner at eight, then."))
    with caplog.at_level(logging.DEBUG):  # the openai client's and the HTTP layer's debug logging included
        provider = OpenAIProvider.for_simulation(simulation)
        provider._create([{"role": "user", "content": "Hello"}], None)
        assert run_turn_task.apply(args=(simulation.pk, 0)).get() == "done"  # the worker's path
    assert [h["authorization"] for h in server.headers] == [f"Bearer {KEY}"] * 2
    assert any(r.name.startswith("openai") for r in caplog.records)  # debug logging was on and captured
    logged = "\n".join(f"{r.getMessage()} {r.args!r} {r.__dict__!r}" for r in caplog.records)
    assert KEY not in logged and "supersecret" not in logged


def test_a_key_encrypted_under_another_key_reads_as_empty_with_a_reason(user, dinner, server, settings):
    simulation = start(user, dinner, server)
    former_secret_key = settings.SECRET_KEY
    settings.ENCRYPTION_KEY = crypto.generate_key()  # as if SECRET_KEY changed: the old token opens no more
    settings.SECRET_KEY = "a-different-secret-key"
    settings.LLM_API_KEY = "sk-server-default-key"

    reloaded = Simulation.objects.get(pk=simulation.pk)
    assert reloaded.api_key == "" and not reloaded.api_key
    reason = crypto.decryption_error(reloaded.api_key)
    assert reason.startswith("the stored API key cannot be decrypted (the server's SECRET_KEY or "
                             "WONDA_ENCRYPTION_KEY changed since it was saved): enter the key again")
    assert reloaded.api_key_hint == "cannot be decrypted: enter it again"

    # The worker's turn fails with that reason (not a crash, not the server's default key) and the run pauses.
    assert run_turn_task.apply(args=(simulation.pk, 0)).get() == "failed"
    assert server.requests == []
    turn = simulation.turns.get(index=0)
    assert turn.status == "failed" and turn.error == reason
    reloaded.refresh_from_db()
    assert reloaded.status == "paused" and "the stored API key cannot be decrypted" in reloaded.pause_reason

    # Saving the row keeps the token: once the former key is listed as an old key, it reads again.
    token = raw_column(simulation)
    reloaded.title = "Renamed"
    reloaded.save()
    assert raw_column(simulation) == token
    settings.ENCRYPTION_OLD_KEYS = ["not-this-one", crypto.generate_key(), former_secret_key]
    assert Simulation.objects.get(pk=simulation.pk).api_key == KEY


def test_rotation_old_keys_decrypt_and_the_first_key_encrypts(user, dinner, server, settings):
    old, new = crypto.generate_key(), crypto.generate_key()
    settings.ENCRYPTION_KEY = old
    simulation = start(user, dinner, server)
    old_token = raw_column(simulation)

    settings.ENCRYPTION_KEY, settings.ENCRYPTION_OLD_KEYS = new, [old]
    reloaded = Simulation.objects.get(pk=simulation.pk)
    assert reloaded.api_key == KEY  # read with the old key
    reloaded.save()
    new_token = raw_column(simulation)
    assert new_token != old_token

    settings.ENCRYPTION_OLD_KEYS = []  # the old key retired: the re-saved value reads with the new key alone
    assert Simulation.objects.get(pk=simulation.pk).api_key == KEY
    set_raw_column(simulation, old_token)
    assert crypto.decryption_error(Simulation.objects.get(pk=simulation.pk).api_key)


def test_setting_a_dedicated_key_later_keeps_keys_saved_under_secret_key_readable(user, dinner, server, settings):
    settings.ENCRYPTION_KEY = ""
    simulation = start(user, dinner, server)
    settings.ENCRYPTION_KEY = crypto.generate_key()
    assert Simulation.objects.get(pk=simulation.pk).api_key == KEY


def test_a_passphrase_as_encryption_key_is_derived_into_a_fernet_key(user, dinner, server, settings):
    settings.ENCRYPTION_KEY = "correct horse battery staple"
    simulation = start(user, dinner, server)
    assert Simulation.objects.get(pk=simulation.pk).api_key == KEY
    settings.ENCRYPTION_KEY, settings.SECRET_KEY = "another passphrase", "another secret key"
    assert crypto.decryption_error(Simulation.objects.get(pk=simulation.pk).api_key)


def test_exports_and_serializers_never_carry_the_key(user, dinner, server):
    simulation = start(user, dinner, server)
    server.script(ok("Dinner at eight, then."))
    assert run_turn_task.apply(args=(simulation.pk, 0)).get() == "done"
    token = raw_column(simulation)
    texts = [json.dumps(exports.to_json(simulation)), exports.to_markdown(simulation), exports.to_fountain(simulation),
             serializers.serialize("json", Simulation.objects.filter(pk=simulation.pk))]
    for text in texts:
        assert KEY not in text and "supersecret" not in text and token not in text


def test_the_migration_encrypts_plain_rows_and_reverses(user, dinner, server):
    migration = importlib.import_module("chronicle.migrations.0004_encrypt_api_keys")
    simulation = start(user, dinner, server)
    set_raw_column(simulation, KEY)  # a row from before the migration
    editor = SimpleNamespace(connection=connection)

    migration.encrypt_keys(apps, editor)
    token = raw_column(simulation)
    assert token != KEY and crypto.decrypt(token) == KEY
    migration.encrypt_keys(apps, editor)  # running again leaves tokens alone
    assert raw_column(simulation) == token
    assert Simulation.objects.get(pk=simulation.pk).api_key == KEY

    migration.decrypt_keys(apps, editor)
    assert raw_column(simulation) == KEY
