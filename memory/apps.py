from django.apps import AppConfig
from django.db import connection, transaction
from django.db.models.signals import post_delete

from memory.recalling.indexing import index_names


def _drop_bank_indexes(sender, instance, **kwargs):
    """A deleted bank's own vector indexes (memory.recalling.indexing) are dropped by a worker, concurrently."""
    from memory.tasks import drop_bank_index_task  # memory.tasks imports models, not ready while apps.py loads

    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_class WHERE relname = ANY(%s)", [list(index_names(instance.pk))])
        if cursor.fetchone():
            bank_id = instance.pk
            transaction.on_commit(lambda: drop_bank_index_task.delay(bank_id))


class MemoryConfig(AppConfig):
    name = "memory"
    verbose_name = "Memory"

    def ready(self):
        post_delete.connect(_drop_bank_indexes, sender="memory.MemoryBank", dispatch_uid="memory-drop-bank-indexes")
