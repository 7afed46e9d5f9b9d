from django.db import migrations
from pgvector.django import VectorExtension


class Migration(migrations.Migration):
    """First of all: pgvector, so every later migration can use vector columns."""

    initial = True
    dependencies = []
    operations = [VectorExtension()]
