from django.apps import AppConfig


class ChronicleConfig(AppConfig):
    name = "chronicle"
    verbose_name = "Chronicle"

    def ready(self) -> None:
        from chronicle.writing.services import record_outside_edit
        from memory.api import memory_edited

        memory_edited.connect(record_outside_edit, dispatch_uid="chronicle-history-of-admin-edits")
