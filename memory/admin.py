"""Memory inspection for staff: browse by bank/agent/kind, search content, see keys and vectors."""

from __future__ import annotations

import numpy as np
from django.contrib import admin, messages
from django.db.models import Count
from django.utils.html import format_html

from memory.models import EmbeddingCache, Memory, MemoryBank, MemoryKey
from memory.services import bank_delete, memory_archive, memory_reembed, memory_restore, memory_update
from memory.signals import memory_edited


def describe_vector(vector) -> str:
    if vector is None:
        return "—"
    array = np.asarray(vector, dtype=np.float32)
    head = ", ".join(f"{x:.4f}" for x in array[:6])
    return f"dim {array.shape[0]} · norm {np.linalg.norm(array):.4f} · [{head}, …]"


class MemoryKeyInline(admin.TabularInline):
    model = MemoryKey
    fields = ["query", "vector_summary"]
    readonly_fields = ["query", "vector_summary"]
    extra = 0
    can_delete = False

    @admin.display(description="embedding")
    def vector_summary(self, obj):
        return describe_vector(obj.embedding)

    def has_add_permission(self, request, obj=None):
        return False  # keys come from seeding (canonical queries), not hand-typed vectors


@admin.register(MemoryBank)
class MemoryBankAdmin(admin.ModelAdmin):
    list_display = ["id", "name", "owner", "seed_status", "seed_percent", "memory_count", "created_at"]
    list_filter = ["seed_status"]
    search_fields = ["name"]
    readonly_fields = ["seed_status", "seed_done", "seed_total", "seed_error", "created_at"]

    def get_queryset(self, request):
        return super().get_queryset(request).annotate(n_memories=Count("memories"))  # one query, not one per row

    @admin.display(description="memories", ordering="n_memories")
    def memory_count(self, obj):
        return obj.n_memories

    # Deleted as everywhere else (bank_delete: the row locked first, so a worker writing into the
    # bank finishes before the cascade, or finds it gone).
    def delete_model(self, request, obj):
        bank_delete(bank=obj)

    def delete_queryset(self, request, queryset):
        for bank in queryset:
            bank_delete(bank=bank)


@admin.register(Memory)
class MemoryAdmin(admin.ModelAdmin):
    list_display = ["id", "bank_ref", "agent", "kind", "category", "importance", "turn", "story_time", "source", "status",
                    "short_content"]
    list_filter = ["kind", "category", "source", "status", "bank", "agent"]
    list_select_related = ["bank"]
    search_fields = ["content", "agent", "about", "speaker"]
    # What a person may change here is what the writer may change on a run's bank page (content,
    # importance, tags, status), through the same services, so it is re-embedded and in History.
    fields = ["bank", "agent", "kind", "category", "about", "speaker", "turn", "story_time", "source", "content",
              "importance", "tags", "status", "participants", "metadata", "embedding_summary", "access_count",
              "last_accessed_turn", "created_at", "updated_at"]
    readonly_fields = ["bank", "agent", "kind", "category", "about", "speaker", "turn", "story_time", "source",
                       "participants",
                       "metadata", "embedding_summary", "access_count", "last_accessed_turn", "created_at",
                       "updated_at"]
    inlines = [MemoryKeyInline]
    actions = ["reembed", "archive"]
    list_per_page = 50

    class Media:
        css = {"all": ["admin_extra/memory.css"]}

    def get_queryset(self, request):
        return super().get_queryset(request).defer("embedding")

    @admin.display(description="bank", ordering="bank_id")
    def bank_ref(self, obj):
        return f"#{obj.bank_id}"  # the bank filter names it; a full name per row makes rows tall

    @admin.display(description="content")
    def short_content(self, obj):
        return obj.content if len(obj.content) <= 90 else obj.content[:90] + "…"

    @admin.display(description="embedding")
    def embedding_summary(self, obj):
        return format_html("<code>{}</code>", describe_vector(obj.embedding))

    def has_add_permission(self, request):
        return False  # a memory needs its vector: the writer's form, the API or a run make them

    def save_model(self, request, obj, form, change):
        """Each changed field through memory's services (a new content is re-embedded by a worker),
        then memory_edited, which the run owning the bank records in its History (with Undo)."""
        stored = Memory.objects.get(pk=obj.pk)
        changes = {}
        for field in ("content", "importance", "tags", "status"):
            if field not in form.changed_data:
                continue
            before, after = getattr(stored, field), getattr(obj, field)
            if field == "status" and after == Memory.Status.ARCHIVED:
                memory_archive(memory=stored)
            elif field == "status":
                memory_restore(memory=stored, status=after)
            else:
                memory_update(memory=stored, **{field: after})
            changes[field] = (list(before) if field == "tags" else before, list(after) if field == "tags" else after)
        if changes:
            memory_edited.send(sender=Memory, memory=stored, actor=request.user, changes=changes)

    @admin.action(description="Re-embed selected memories (content and keys)")
    def reembed(self, request, queryset):
        n = 0
        for memory in queryset:
            memory_reembed(memory=memory)
            n += 1
        self.message_user(request, f"Re-embedded {n} memories.", messages.SUCCESS)

    @admin.action(description="Archive selected memories")
    def archive(self, request, queryset):
        n = 0
        for memory in queryset.exclude(status=Memory.Status.ARCHIVED):
            memory_archive(memory=memory)
            n += 1
        self.message_user(request, f"Archived {n} memories.", messages.SUCCESS)


@admin.register(EmbeddingCache)
class EmbeddingCacheAdmin(admin.ModelAdmin):
    list_display = ["id", "model", "sha256", "created_at"]
    list_filter = ["model"]
    search_fields = ["sha256"]
    exclude = ["vector"]
    readonly_fields = ["model", "sha256", "vector_summary", "created_at"]

    @admin.display(description="vector")
    def vector_summary(self, obj):
        return describe_vector(obj.vector)
