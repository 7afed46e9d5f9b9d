"""The vector columns take the deployment's size (WONDA_EMBEDDING_DIM): recorded without a size,
made at the setting's size on a database with no memories yet (memory.embedding.columns)."""

from django.conf import settings
from django.db import migrations

import memory.fields


def follow_setting(apps, schema_editor):
    from memory.embedding.columns import resize_empty

    with schema_editor.connection.cursor() as cursor:
        resize_empty(cursor, settings.EMBEDDING_DIM)


class Migration(migrations.Migration):

    dependencies = [
        ('memory', '0015_opinion_kind'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(model_name='memory', name='embedding', field=memory.fields.DeploymentVectorField()),
                migrations.AlterField(model_name='memorykey', name='embedding', field=memory.fields.DeploymentVectorField()),
                migrations.AlterField(model_name='embeddingcache', name='vector', field=memory.fields.DeploymentVectorField()),
            ],
            database_operations=[migrations.RunPython(follow_setting, migrations.RunPython.noop)],
        ),
    ]
