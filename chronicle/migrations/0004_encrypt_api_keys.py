"""Simulation API keys encrypted at rest: the column becomes text (a token of a 500-character key is
~770 characters) and every plain-text key is encrypted under the current key (core/crypto.py).

Raw SQL, not the historical model: its field would already try to decrypt the plain text. Reversible:
going back decrypts each key; a token no configured key opens cannot be restored and is emptied.
"""

from cryptography.fernet import InvalidToken
from django.db import migrations

import core.crypto
from core import crypto


def _rows(apps, schema_editor):
    Simulation = apps.get_model("chronicle", "Simulation")
    quote = schema_editor.connection.ops.quote_name
    table = quote(Simulation._meta.db_table)
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(f"SELECT id, api_key FROM {table} WHERE api_key <> ''")
        rows = cursor.fetchall()
    return table, rows


def encrypt_keys(apps, schema_editor):
    table, rows = _rows(apps, schema_editor)
    with schema_editor.connection.cursor() as cursor:
        for pk, value in rows:
            try:
                crypto.decrypt(value)
                continue  # already a token (the migration ran before and was faked back)
            except InvalidToken:
                pass
            cursor.execute(f"UPDATE {table} SET api_key = %s WHERE id = %s", [crypto.encrypt(value), pk])


def decrypt_keys(apps, schema_editor):
    table, rows = _rows(apps, schema_editor)
    with schema_editor.connection.cursor() as cursor:
        for pk, value in rows:
            try:
                plain = crypto.decrypt(value)
            except InvalidToken:
                plain = ""  # unreadable under every configured key: nothing to restore
            cursor.execute(f"UPDATE {table} SET api_key = %s WHERE id = %s", [plain, pk])


class Migration(migrations.Migration):

    dependencies = [
        ("chronicle", "0003_writing"),
    ]

    operations = [
        migrations.AlterField(
            model_name="simulation",
            name="api_key",
            field=core.crypto.EncryptedTextField(blank=True, max_length=500, verbose_name="API key"),
        ),
        migrations.RunPython(encrypt_keys, decrypt_keys),
    ]
