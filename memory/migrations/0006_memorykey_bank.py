"""MemoryKey rows carry their memory's bank_id (a database-only column, set by a trigger), so a
bank's keys can have their own partial HNSW index (memory.indexing); Django never reads it."""

from django.db import migrations

FORWARD = """
ALTER TABLE memory_memorykey ADD COLUMN IF NOT EXISTS bank_id bigint;
UPDATE memory_memorykey k SET bank_id = m.bank_id FROM memory_memory m WHERE m.id = k.memory_id;
ALTER TABLE memory_memorykey ALTER COLUMN bank_id SET NOT NULL;
CREATE INDEX IF NOT EXISTS memorykey_bank ON memory_memorykey (bank_id);

CREATE FUNCTION memorykey_set_bank() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    SELECT m.bank_id INTO NEW.bank_id FROM memory_memory m WHERE m.id = NEW.memory_id;
    RETURN NEW;
END $$;
CREATE TRIGGER memorykey_set_bank BEFORE INSERT OR UPDATE OF memory_id ON memory_memorykey
    FOR EACH ROW EXECUTE FUNCTION memorykey_set_bank();
"""

BACKWARD = """
DROP TRIGGER IF EXISTS memorykey_set_bank ON memory_memorykey;
DROP FUNCTION IF EXISTS memorykey_set_bank();
ALTER TABLE memory_memorykey DROP COLUMN IF EXISTS bank_id;
"""


class Migration(migrations.Migration):
    dependencies = [("memory", "0005_termstat")]
    operations = [migrations.RunSQL(FORWARD, BACKWARD)]
