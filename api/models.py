"""Per-user API tokens: shown once when made, stored as a hash, revocable."""

from __future__ import annotations

import hashlib
import secrets

from django.conf import settings
from django.db import models
from django.utils import timezone

from memory.api import limits

PREFIX = "wonda_"


def token_hash(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


class ApiTokenQuerySet(models.QuerySet):
    def live(self):
        return self.filter(revoked__isnull=True)


class ApiToken(models.Model):
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100)
    hint = models.CharField(max_length=20)  # "wonda_…a1b2": enough to tell tokens apart on the page
    digest = models.CharField(max_length=64, unique=True)
    created = models.DateTimeField(auto_now_add=True)
    last_used = models.DateTimeField(null=True, blank=True)
    revoked = models.DateTimeField(null=True, blank=True)

    objects = ApiTokenQuerySet.as_manager()

    class Meta:
        ordering = ["-created"]

    def __str__(self) -> str:
        return f"{self.name} ({self.hint})"

    @classmethod
    def issue(cls, *, user, name: str) -> tuple["ApiToken", str]:
        """A new token and its secret, which is never stored and never shown again. A name that breaks
        the text rule (memory.services.validation) is a ValidationError naming it."""
        name = limits.clean_text(name.strip()[:100], "name", limit=100, required=False, name=True)
        raw = PREFIX + secrets.token_urlsafe(32)
        token = cls.objects.create(user=user, name=name or "API token", hint=f"{PREFIX}…{raw[-4:]}",
                                   digest=token_hash(raw))
        return token, raw

    @classmethod
    def authenticate(cls, raw: str):
        token = cls.objects.live().select_related("user").filter(digest=token_hash(raw or "")).first()
        if token is None or not token.user.is_active:
            return None
        cls.objects.filter(pk=token.pk).update(last_used=timezone.now())
        return token

    def revoke(self) -> None:
        if self.revoked is None:
            self.revoked = timezone.now()
            self.save(update_fields=["revoked"])
