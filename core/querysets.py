"""QuerySet pieces shared by the apps (memory, chronicle and chronicle.simulation all use them; each may
import wonda_site, while memory must not import chronicle)."""

from __future__ import annotations

from django.db import models


class OwnedQuerySet(models.QuerySet):
    """Rows that have an `owner`. Start user-facing queries from `owned_by(request.user)` so that no
    object leaks across users; an anonymous or missing user owns nothing."""

    def owned_by(self, user):
        if not getattr(user, "is_authenticated", False):
            return self.none()
        return self.filter(owner=user)
