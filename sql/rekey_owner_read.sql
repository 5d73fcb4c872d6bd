--
-- rekey_owner_read (review h2 of 3c28cf4, cdc._rekey_pairs): the re-key
-- reads the target's key texts as the table's owner in a security-
-- restricted operation.  Checked here: FORCE ROW LEVEL SECURITY with a
-- policy that hides rows from the owner (the re-key must still see every
-- row: SECURITY_NOFORCE_RLS); a setting the owner's code changes without
-- LOCAL is undone (GUC nest level); an error raised by the owner's code
-- inside the read leaves the caller's identity and settings intact, inside
-- a caught subtransaction too; PUBLIC may not call cdc._rekey_pairs.
-- Tables of this suite are called h2rp_*.
--
CREATE ROLE h2rp_owner;
GRANT CREATE ON SCHEMA public TO h2rp_owner;
SET ROLE h2rp_owner;
CREATE TABLE h2rp_acct (id int PRIMARY KEY, code int NOT NULL UNIQUE, body text);
RESET ROLE;
SELECT target, key_columns FROM cdc.register_mapping('h2rp_acct');
SELECT cdc_apply(dbz('c', 'h2rp_acct', '{"id": 1, "code": 10, "body": "a"}', '0/1000', 100), 'h2rp_acct');
SELECT cdc_apply(dbz('c', 'h2rp_acct', '{"id": 2, "code": 20, "body": "hidden"}', '0/1100', 101), 'h2rp_acct');
-- a policy that hides row 2 from everyone it applies to, forced on the owner
ALTER TABLE h2rp_acct ENABLE ROW LEVEL SECURITY;
ALTER TABLE h2rp_acct FORCE ROW LEVEL SECURITY;
CREATE POLICY h2rp_hide ON h2rp_acct USING (body <> 'hidden');
SET ROLE h2rp_owner;
SELECT count(*) AS rows_the_owner_sees FROM h2rp_acct;
RESET ROLE;
SELECT target, key_columns FROM cdc.register_mapping('h2rp_acct', key_columns => '{code}');
-- both records moved to the new key (none left under the old one)
SELECT entity_key FROM cdc.entities WHERE target = 'h2rp_acct'::regclass ORDER BY 1;
ALTER TABLE h2rp_acct NO FORCE ROW LEVEL SECURITY;
ALTER TABLE h2rp_acct DISABLE ROW LEVEL SECURITY;
DROP POLICY h2rp_hide ON h2rp_acct;
-- the owner's code sets work_mem without LOCAL while the read is planned
SET ROLE h2rp_owner;
CREATE FUNCTION h2rp_pred(int) RETURNS boolean LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
  PERFORM pg_catalog.set_config('work_mem', '1234kB', false);
  IF current_setting('h2rp.fail', true) = 'on' THEN
    RAISE EXCEPTION 'h2rp: owner code failed as %', current_user;
  END IF;
  RETURN true;
END $$;
CREATE INDEX h2rp_trap ON h2rp_acct (body) WHERE public.h2rp_pred(0);
RESET ROLE;
SET work_mem = '4MB';
\c -
SET work_mem = '4MB';
SELECT target, key_columns FROM cdc.register_mapping('h2rp_acct', key_columns => '{id}');
SELECT current_setting('work_mem') AS work_mem, current_user = session_user AS same_user;
SELECT entity_key FROM cdc.entities WHERE target = 'h2rp_acct'::regclass ORDER BY 1;
-- an error of the owner's code inside the read, caught by the caller
\c -
SET work_mem = '4MB';
SET h2rp.fail = 'on';
DO $$
BEGIN
  PERFORM cdc.register_mapping('h2rp_acct', key_columns => '{code}');
EXCEPTION WHEN OTHERS THEN
  RAISE NOTICE 'caught: %', SQLERRM;
END $$;
SELECT current_setting('work_mem') AS work_mem, current_user = session_user AS same_user;
SELECT key_columns FROM cdc.mapping WHERE target = 'h2rp_acct'::regclass;
RESET h2rp.fail;
-- PUBLIC may not call it
SET ROLE h2rp_owner;
SELECT * FROM cdc._rekey_pairs('h2rp_acct', '{id}', '{code}');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
RESET ROLE;
DROP TABLE h2rp_acct;
DROP FUNCTION h2rp_pred(int);
REVOKE CREATE ON SCHEMA public FROM h2rp_owner;
DROP ROLE h2rp_owner;
