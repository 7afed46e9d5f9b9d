from io import StringIO

from django.core.management import call_command

from memory.models import Memory


def test_staff_can_inspect_memories_with_keys_and_vector_summary(seeded_bank, staff_user, client_for):
    client = client_for(staff_user)
    identity = Memory.objects.get(bank=seeded_bank, agent="Alex", category="identity")
    listing = client.get("/admin/memory/memory/", {"q": "pragmatic"})
    assert listing.status_code == 200
    assert "You are Alex" in listing.content.decode()
    page = client.get(f"/admin/memory/memory/{identity.pk}/change/").content.decode()
    assert "who am I?" in page and "dim 384 · norm 1.0000" in page
    response = client.post("/admin/memory/memory/", {"action": "archive", "_selected_action": [identity.pk]})
    assert response.status_code == 302
    identity.refresh_from_db()
    assert identity.status == "archived"


def test_non_staff_cannot_open_memory_admin(seeded_bank, user, client_for):
    response = client_for(user).get("/admin/memory/memory/")
    assert response.status_code == 302 and "/admin/login/" in response["Location"]


def test_recall_command_prints_ranked_results_with_components(seeded_bank):
    out = StringIO()
    call_command("recall", "tell me about myself", bank=seeded_bank.pk, agent="Alex", stdout=out)
    lines = out.getvalue().splitlines()
    assert lines[0].startswith('5 result(s) for "tell me about myself"')
    assert lines[1].startswith(" 1. score ") and "sim " in lines[1] and "[Alex/character/identity]" in lines[1]
    assert "You are Alex" in lines[2]
