import pytest

from api.models import ApiToken
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
