--
-- stream_marks_barrier (security review h2): cdc.stream_marks shows the
-- marks of the targets the reader may SELECT from without row-level
-- security applying to it, as cdc.entities, cdc.ledger, cdc.stream_mark's
-- own policy and cdc.delivery_processed() do, and a reader's own function
-- in a WHERE clause never sees the marks of the targets it hides.  Before,
-- the view was not a security_barrier (a cheap function of the reader was
-- evaluated before the privilege filter, on every mark, and saw the targets
-- eve may not read), and it showed the source and the last applied commit
-- LSN of a target whose row-level security policy applied to the reader.
-- Objects: smb_*.
--
CREATE TABLE smb_secret (id int PRIMARY KEY, v text);
SELECT target FROM cdc.register_mapping('smb_secret');
SELECT cdc_apply(dbz('c', 'smb_secret', '{"id": 1, "v": "a"}', '0/4242', 1, src => 'smb_src'), 'smb_secret');
SELECT ordering FROM cdc.set_ordering('smb_secret', 'stream');
SELECT source_name, version FROM cdc.stream_marks WHERE target = 'smb_secret'::regclass;
SELECT reloptions FROM pg_class WHERE oid = 'cdc.stream_marks'::regclass;
CREATE ROLE smb_eve;
CREATE SCHEMA smb_eve AUTHORIZATION smb_eve;
SET ROLE smb_eve;
CREATE FUNCTION smb_eve.leak(t regclass) RETURNS boolean LANGUAGE plpgsql COST 0.0000001 AS $$
BEGIN
  RAISE NOTICE 'leaked %', t;
  RETURN true;
END $$;
-- eve may not read the table: no row, and her function sees no mark
SELECT count(*) AS marks_seen FROM cdc.stream_marks m WHERE smb_eve.leak(m.target);
SELECT count(*) AS marks_seen FROM cdc.stream_marks m
 WHERE m.target = 'smb_secret'::regclass AND smb_eve.leak(m.target);
RESET ROLE;
-- with SELECT under a policy that applies to her: still no mark (as cdc.entities)
GRANT SELECT ON smb_secret TO smb_eve;
ALTER TABLE smb_secret ENABLE ROW LEVEL SECURITY;
CREATE POLICY smb_none ON smb_secret FOR SELECT TO smb_eve USING (false);
SET ROLE smb_eve;
SELECT count(*) AS marks_seen FROM cdc.stream_marks WHERE target = 'smb_secret'::regclass;
SELECT count(*) AS table_rows_seen FROM cdc.stream_mark WHERE target = 'smb_secret'::regclass;
RESET ROLE;
-- without the policy she reads the mark
ALTER TABLE smb_secret DISABLE ROW LEVEL SECURITY;
SET ROLE smb_eve;
SELECT source_name, version FROM cdc.stream_marks WHERE target = 'smb_secret'::regclass;
RESET ROLE;
DROP SCHEMA smb_eve CASCADE;
DROP TABLE smb_secret;
DROP ROLE smb_eve;
