"""Memory tags are labels: at most 20, each at most 50 characters, on every path that writes them."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from memory.models import Memory
from memory.services import bank_create, memory_create, memory_update

pytestmark = pytest.mark.django_db


def test_a_memory_keeps_twenty_tags_and_refuses_a_twenty_first(user):
    bank = bank_create(name="tags", owner=user)
    memory = memory_create(bank=bank, content="Alex keeps a paper notebook.", tags=[f"t{i}" for i in range(20)])
    assert len(Memory.objects.get(pk=memory.pk).tags) == 20
    with pytest.raises(ValidationError, match="A memory has at most 20 tags; this one has 21."):
        memory_update(memory=memory, tags=[f"t{i}" for i in range(21)])
    with pytest.raises(ValidationError, match="at most 50 characters"):
        memory_create(bank=bank, content="Another.", tags=["x" * 51])
    assert len(Memory.objects.get(pk=memory.pk).tags) == 20 and Memory.objects.filter(bank=bank).count() == 1


def test_the_admin_shows_the_tag_limit_as_a_field_error(seeded_bank, staff_user, client_for):
    memory = Memory.objects.filter(bank=seeded_bank).first()
    client = client_for(staff_user)
    url = f"/admin/memory/memory/{memory.pk}/change/"
    form = client.get(url).context["adminform"].form
    data = {name: form[name].value() for name in form.fields}
    data = {k: ("" if v is None else v) for k, v in data.items()}
    data["tags"] = ",".join(f"t{i}" for i in range(21))
    data = {k: v for k, v in data.items() if not isinstance(v, list) or k == "evidence"}
    response = client.post(url, data)
    assert response.status_code == 200
    assert "A memory has at most 20 tags; this one has 21." in response.content.decode()
    memory.refresh_from_db()
    assert len(memory.tags) <= 20
