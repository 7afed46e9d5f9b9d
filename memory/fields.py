"""The vector column of the deployment's size (settings.EMBEDDING_DIM, WONDA_EMBEDDING_DIM).

The migrations record no size: the column is made at the size the setting holds when `migrate`
creates (or, on an empty database, resizes) it, and `manage.py reembed` moves a database with
memories to another size. A size written into the migrations would have made every deployment of
another model a new migration (and `makemigrations --check` fail wherever the setting differs).
"""

from __future__ import annotations

from django.conf import settings
from pgvector.django import VectorField


class DeploymentVectorField(VectorField):
    def __init__(self, *args, **kwargs):
        kwargs.pop("dimensions", None)
        super().__init__(*args, **kwargs)

    def db_type(self, connection) -> str:
        return f"vector({int(settings.EMBEDDING_DIM)})"
