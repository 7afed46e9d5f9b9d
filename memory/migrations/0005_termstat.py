"""BM25 statistics kept by the database (memory.models.TermStat), and vectors stored inline.

Statement-level triggers with transition tables handle inserts and deletes in one aggregate per
statement (seeding inserts thousands of rows at once); a row-level trigger handles the rare update
that changes what is counted (content, status, agent, kind, bank), so the access-count update of
every search fires nothing.
"""

from django.db import migrations, models


def _delta(rows: str, sign: str) -> str:
    """Per-(bank, agent, kind, term) deltas of active rows: "" counts documents and sums lengths."""
    return f"""
        SELECT r.bank_id, r.agent, r.kind, ''::text AS term, {sign} AS df, {sign} * length(r.search) AS len
          FROM {rows} r WHERE r.status = 'active'
        UNION ALL
        SELECT r.bank_id, r.agent, r.kind, t.term, {sign}, 0
          FROM {rows} r CROSS JOIN LATERAL unnest(tsvector_to_array(r.search)) AS t(term) WHERE r.status = 'active'"""


def _apply(deltas: str) -> str:
    # Sorted so that concurrent writers take the rows' locks in one order: no deadlock.
    return f"""
        INSERT INTO memory_termstat AS s (bank_id, agent, kind, term, df, length)
        SELECT d.bank_id, d.agent, d.kind, d.term, sum(d.df), sum(d.len)
          FROM ({deltas}) AS d (bank_id, agent, kind, term, df, len)
         GROUP BY 1, 2, 3, 4 HAVING sum(d.df) <> 0 OR sum(d.len) <> 0
         ORDER BY 1, 2, 3, 4
        ON CONFLICT (bank_id, agent, kind, term)
        DO UPDATE SET df = s.df + excluded.df, length = s.length + excluded.length"""


TRIGGERS = f"""
CREATE FUNCTION memory_termstat_on_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    {_apply(_delta("new_rows", "1"))};
    RETURN NULL;
END $$;

CREATE FUNCTION memory_termstat_on_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    {_apply(_delta("old_rows", "-1"))};
    DELETE FROM memory_termstat s USING (SELECT DISTINCT bank_id, agent, kind FROM old_rows) g
     WHERE s.bank_id = g.bank_id AND s.agent = g.agent AND s.kind = g.kind AND s.df <= 0;
    RETURN NULL;
END $$;

CREATE FUNCTION memory_termstat_on_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    {_apply(_delta("(SELECT OLD.*)", "-1") + " UNION ALL " + _delta("(SELECT NEW.*)", "1"))};
    DELETE FROM memory_termstat s
     WHERE s.bank_id = OLD.bank_id AND s.agent = OLD.agent AND s.kind = OLD.kind AND s.df <= 0;
    RETURN NULL;
END $$;

CREATE TRIGGER memory_termstat_insert AFTER INSERT ON memory_memory
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION memory_termstat_on_insert();
CREATE TRIGGER memory_termstat_delete AFTER DELETE ON memory_memory
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION memory_termstat_on_delete();
CREATE TRIGGER memory_termstat_update AFTER UPDATE ON memory_memory FOR EACH ROW
    WHEN (OLD.search IS DISTINCT FROM NEW.search OR OLD.status IS DISTINCT FROM NEW.status
          OR OLD.agent IS DISTINCT FROM NEW.agent OR OLD.kind IS DISTINCT FROM NEW.kind
          OR OLD.bank_id IS DISTINCT FROM NEW.bank_id)
    EXECUTE FUNCTION memory_termstat_on_update();

{_apply(_delta("memory_memory", "1"))};
"""

UNTRIGGER = """
DROP TRIGGER IF EXISTS memory_termstat_insert ON memory_memory;
DROP TRIGGER IF EXISTS memory_termstat_delete ON memory_memory;
DROP TRIGGER IF EXISTS memory_termstat_update ON memory_memory;
DROP FUNCTION IF EXISTS memory_termstat_on_insert();
DROP FUNCTION IF EXISTS memory_termstat_on_delete();
DROP FUNCTION IF EXISTS memory_termstat_on_update();
"""

# A memory row (384 floats = 1.5 kB, plus its text and tsvector) is just over PostgreSQL's 2 kB
# toast threshold, so its vector went out of line: every exact scan paid a second lookup per row
# (11.5k extra buffer reads for 10k rows; the scan took 18 ms instead of 11). Keep rows whole.
INLINE = """
ALTER TABLE memory_memory ALTER COLUMN embedding SET STORAGE MAIN;
ALTER TABLE memory_memory SET (toast_tuple_target = 8160);
ALTER TABLE memory_memorykey ALTER COLUMN embedding SET STORAGE MAIN;
ALTER TABLE memory_memorykey SET (toast_tuple_target = 8160);
"""

OUTLINE = """
ALTER TABLE memory_memory ALTER COLUMN embedding SET STORAGE EXTERNAL;
ALTER TABLE memory_memory RESET (toast_tuple_target);
ALTER TABLE memory_memorykey ALTER COLUMN embedding SET STORAGE EXTERNAL;
ALTER TABLE memory_memorykey RESET (toast_tuple_target);
"""


class Migration(migrations.Migration):

    dependencies = [
        ('memory', '0004_memory_search'),
    ]

    operations = [
        migrations.CreateModel(
            name='TermStat',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('bank_id', models.BigIntegerField()),
                ('agent', models.CharField(max_length=100)),
                ('kind', models.CharField(max_length=32)),
                ('term', models.TextField()),
                ('df', models.BigIntegerField(default=0)),
                ('length', models.BigIntegerField(default=0)),
            ],
            options={
                'constraints': [models.UniqueConstraint(fields=('bank_id', 'agent', 'kind', 'term'), name='termstat_unique')],
            },
        ),
        migrations.RunSQL(TRIGGERS, UNTRIGGER),
        migrations.RunSQL(INLINE, OUTLINE),
    ]
