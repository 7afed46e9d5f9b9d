"""What the memory app tells whoever listens, without knowing who (chronicle keeps a run's History)."""

from django.dispatch import Signal

# A person changed a memory outside a run's pages (the admin): memory, actor, and
# changes = {field: (before, after)} for content, importance, tags and status.
memory_edited = Signal()
