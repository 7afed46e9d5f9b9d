import pytest

from api.models import ApiToken
from chronicle.simulation.run.models import Simulation
from devtools.fake_llm import FakeLLM
from memory.services import bank_create, memory_create
# The memory tests' seeded bank (Alex and Jordan's sheets and the scene), for the API to serve.
from tests.memory.conftest import _fresh_local_embedding_cache, alex, bank, jordan, scenario, seeded_bank  # noqa: F401


@pytest.fixture
def ada_token(user):
    """An API token of the test user (the secret, shown once)."""
    return ApiToken.issue(user=user, name="tests")[1]


@pytest.fixture
def own_bank(user, seeded_bank):
    """The memory tests' seeded bank, owned by the test user."""
    seeded_bank.owner = user
    seeded_bank.save(update_fields=["owner"])
    return seeded_bank


@pytest.fixture
def woods(user):
    """Ava's bank of three tagged memories at turns 1–3: wolves howling, twice (importance 4, tagged
    wolves; 6, tagged night), and the baker paid (3, tagged town). Reflect and consolidate read it."""
    woods = bank_create(name="Ava's woods", owner=user)
    for turn, (text, tags, importance) in enumerate([
            ("Ava saw wolves howling at the edge of the forest.", ["wolves"], 4),
            ("Ava heard wolves howling by the forest edge.", ["night"], 6),
            ("Ava paid the baker three coins for bread.", ["town"], 3)], start=1):
        memory_create(bank=woods, content=text, agent="Ava", kind="episodic", tags=tags, importance=importance,
                      turn=turn, source="earned")
    return woods


@pytest.fixture
def model_run(user):
    """A running simulation of Ava on an OpenAI-compatible model (the fake server) and its bank, whose
    reflections and summaries the run's model writes: (bank, the fake server)."""
    fake = FakeLLM().start()
    try:
        run_bank = bank_create(name="run", owner=user)
        Simulation.objects.create(owner=user, title="Woods", status="running", max_turns=5, bank=run_bank,
                                  cast_snapshot=[{"name": "Ava"}], provider="openai", base_url=fake.base_url,
                                  model="test-model")
        yield run_bank, fake
    finally:
        fake.stop()
