"""`manage.py memory_check [--repair]` (seed 002): each kind of damage a test inflicts is
found, then mended, and a second check finds nothing."""

from __future__ import annotations

import io
from datetime import timedelta

from django.core.management import call_command
from django.db import connection
from django.urls import reverse
from django.utils import timezone

from memory.measuring.integrity import memory_check
from memory.models import Memory, MemoryBank, MemoryKey
from memory.recalling.filters import MemoryFilter
from memory.recalling.search import recall
from memory.services import bank_create, memory_archive


def check(*args) -> str:
    out = io.StringIO()
    call_command("memory_check", *args, stdout=out)
    return out.getvalue()


def test_each_kind_of_damage_is_found_then_mended(seeded_bank):
    other = bank_create(name="other")
    alex = Memory.objects.in_bank(seeded_bank).filter(agent="Alex", kind="character")
    stale, empty, archived = alex.filter(category="background")[:1].get(), alex.get(category="identity"), \
        alex.get(category="communication")
    Memory.objects.filter(pk=stale.pk).update(content="Alex grew up by the sea.", embedding_stale=True,
                                              updated_at=timezone.now() - timedelta(hours=1))
    Memory.objects.filter(pk=empty.pk).update(embedding=[0.0] * 384)
    key = MemoryKey.objects.filter(memory__bank=seeded_bank).exclude(memory=archived).first()
    memory_archive(memory=archived)
    assert MemoryKey.objects.filter(memory=archived).exists()
    with connection.cursor() as cursor:
        cursor.execute("UPDATE memory_memorykey SET bank_id = %s WHERE id = %s", [other.pk, key.pk])
        cursor.execute("UPDATE memory_termstat SET df = df + 5 WHERE bank_id = %s AND term = '' AND agent = 'Alex'",
                       [seeded_bank.pk])
        # (any table will do for the name; one without pending deferred FK checks in this transaction)
        cursor.execute("CREATE INDEX memorykey_bank999999_hnsw ON auth_group (id)")
    stuck = bank_create(name="stuck")
    MemoryBank.objects.filter(pk=stuck.pk).update(seed_status="running", created_at=timezone.now() - timedelta(hours=2))

    report = check()
    for line in ("stale vectors           1 found", "empty vectors           1 found",
                 "keys in the wrong bank  1 found", "BM25 statistics drift   1 found",
                 "banks stuck seeding     1 found", "orphan vector indexes   1 found  (memorykey_bank999999_hnsw)"):
        assert line in report
    assert "run with --repair" in report
    # An archived memory's keys are not damage: archiving is ordinary use, and a restore finds it as before.
    assert "archived" not in report
    assert not any(f.fixed for f in memory_check())  # a check alone changes nothing

    repaired = check("--repair")
    assert "Mended" in repaired and "1 found, 1 fixed" in repaired
    assert "Nothing to mend." in check()
    # What the repairs did: the edited memory is found by its new meaning, the empty one by its own.
    flt = MemoryFilter(agent="Alex", kinds=["character"])
    assert stale.pk in [r.memory.pk for r in recall(seeded_bank, "Alex grew up by the sea.", filter=flt, k=3)]
    assert empty.pk in [r.memory.pk for r in recall(seeded_bank, empty.content, filter=flt, k=3)]
    assert MemoryKey.objects.filter(memory=archived).exists()
    with connection.cursor() as cursor:  # bank_id is a database-only column (migration 0006)
        cursor.execute("SELECT bank_id FROM memory_memorykey WHERE id = %s", [key.pk])
        assert cursor.fetchone()[0] == seeded_bank.pk
    stuck.refresh_from_db()
    assert stuck.seed_status == "failed" and "start the run again" in stuck.seed_error


def test_the_integrity_page_is_for_staff_and_repairs(seeded_bank, user, staff_user, client_for):
    Memory.objects.filter(bank=seeded_bank, agent="Alex", category="identity").update(embedding=[0.0] * 384)
    url = reverse("memory_integrity")
    assert client_for(user).get(url).status_code == 302  # to the admin login
    page = client_for(staff_user).get(url).content.decode()
    assert "empty vectors" in page and "Repair 1 problem" in page
    after = client_for(staff_user).post(url).content.decode()
    assert "Repaired just now." in after and "Nothing to mend" not in after
    assert "Nothing to mend." in client_for(staff_user).get(url).content.decode()


def test_ordinary_use_leaves_nothing_to_mend(seeded_bank, alex, jordan, scenario):
    """The writer edits a sheet (its old memories are archived, keys and all) and archives a memory
    by hand: the store is as it should be, and memory_check says so."""
    from dataclasses import replace

    from memory.forming.seeding import seed_bank

    seed_bank(bank=seeded_bank, characters=[replace(alex, background="Alex grew up by the sea."), jordan],
              scenario=scenario)
    memory_archive(memory=Memory.objects.in_bank(seeded_bank).filter(agent="Jordan", kind="character").first())
    archived = Memory.objects.in_bank(seeded_bank).filter(status=Memory.Status.ARCHIVED)
    assert archived.count() >= 2 and MemoryKey.objects.filter(memory__in=archived).exists()
    assert "Nothing to mend." in check()
