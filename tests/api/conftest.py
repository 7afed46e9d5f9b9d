# The memory tests' seeded bank (Alex and Jordan's sheets and the scene), for the API to serve.
from tests.memory.conftest import _fresh_local_embedding_cache, alex, bank, jordan, scenario, seeded_bank  # noqa: F401
