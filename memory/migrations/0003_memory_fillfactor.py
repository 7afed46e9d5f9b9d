from django.db import migrations


class Migration(migrations.Migration):
    """Room on each page so counting an access (access_count, last_accessed_turn) is a HOT update:
    no new entry in the HNSW index per retrieval, which otherwise costs milliseconds each time."""

    dependencies = [("memory", "0002_core")]
    operations = [
        migrations.RunSQL(
            "ALTER TABLE memory_memory SET (fillfactor = 70)",
            reverse_sql="ALTER TABLE memory_memory RESET (fillfactor)",
        )
    ]
