"""The bank page's pruning: a button archives the faded memories (shown, marked, on the page), another
brings them back; another writer's bank is a 404."""

from __future__ import annotations

import pytest
from django.urls import reverse

from memory.models import Memory
from memory.services import memory_create

pytestmark = pytest.mark.django_db


def test_the_bank_page_prunes_shows_and_restores(client_for, user, finished):
    bank = finished.bank
    dull = memory_create(bank=bank, content="Alex noticed a chipped kettle.", agent=finished.cast_names[0],
                         kind="episodic", importance=1, source="earned", turn=-500)
    client = client_for(user)
    page = client.get(reverse("chronicle_memories", args=[finished.pk])).content.decode()
    assert "Prune faded memories</button>" in page and "Restore pruned memories" not in page
    done = client.post(reverse("chronicle_memory_prune", args=[finished.pk]), follow=True).content.decode()
    pruned = Memory.objects.in_bank(bank).filter(status="archived", metadata__has_key="pruned").count()
    assert pruned >= 1 and Memory.objects.get(pk=dull.pk).status == "archived"
    assert "archived (out of every search, not deleted)" in done and f"Restore pruned memories ({pruned})</button>" in done
    assert not Memory.objects.in_bank(bank).filter(status="archived").exclude(source="earned").exists()
    shown = client.get(reverse("chronicle_memories", args=[finished.pk]) + "?status=archived").content.decode()
    assert "Alex noticed a chipped kettle." in shown and "(pruned at turn" in shown
    back = client.post(reverse("chronicle_memory_prune", args=[finished.pk]), {"restore": "1"}, follow=True)
    assert f"{pruned} pruned memor" in back.content.decode() and "restored" in back.content.decode()
    assert Memory.objects.get(pk=dull.pk).status == "active"


def test_another_writers_bank_cannot_be_pruned(client_for, other_user, finished):
    assert client_for(other_user).post(reverse("chronicle_memory_prune", args=[finished.pk])).status_code == 404
