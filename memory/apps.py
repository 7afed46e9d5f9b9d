from django.apps import AppConfig
from django.db import connection
from django.db.models.signals import post_delete

from memory.queue import queue_on_commit
from memory.recalling.indexing import index_names


def _drop_bank_indexes(sender, instance, **kwargs):
    """A deleted bank's own vector indexes (memory.recalling.indexing) are dropped by a worker, concurrently."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_class WHERE relname = ANY(%s)", [list(index_names(instance.pk))])
        if cursor.fetchone():
            bank_id = instance.pk
            queue_on_commit("drop_bank_index_task", bank_id)


class MemoryConfig(AppConfig):
    name = "memory"
    verbose_name = "Memory"

    def ready(self):
        # Every process registers memory's tasks, so memory.queue finds them by name (a worker's
        # autodiscovery alone would leave the web's registry without them). Here and not at the top:
        # memory.tasks imports the models, which are not loaded while this module is.
        import memory.tasks  # noqa: F401

        post_delete.connect(_drop_bank_indexes, sender="memory.MemoryBank", dispatch_uid="memory-drop-bank-indexes")
