import os

from celery import Celery
from celery.signals import worker_process_init

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "wonda_site.settings")

app = Celery("wonda")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
# Simulation and writing tasks live in sub-packages of chronicle; name them so workers register them.
app.autodiscover_tasks(["chronicle.simulation", "chronicle.writing"])


@worker_process_init.connect
def _validate_embedding_model(**_kwargs) -> None:
    # Each worker process loads the model once, at start, and refuses to run with a model whose
    # dimension does not match the vector column (a clear message instead of failing mid-seed).
    from memory.embedding import validate_model

    validate_model()
