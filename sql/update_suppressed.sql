--
-- update_suppressed (review h3): an update written as an UPDATE before the
-- upsert (UpdateBeforeUpsert: a target with BEFORE INSERT row or INSERT
-- statement triggers, or an event without a destination-only column) whose
-- row a BEFORE UPDATE trigger suppresses (RETURN NULL).  The UPDATE found
-- the row and wrote nothing, the engine took its 0 rows for "the key has no
-- row" and ran the upsert as well: the BEFORE UPDATE trigger fired twice
-- for one change, the BEFORE INSERT trigger fired for an update, and the
-- INSERT evaluated a serial default (its sequence advanced) where
-- PostgreSQL's apply fires the BEFORE UPDATE trigger once and evaluates
-- nothing (docs/semantics.md: row triggers fire once per row for an
-- update).  Expected: the key's row is locked first; a key with a row gets
-- the UPDATE only (a suppressed one writes nothing), a key without one the
-- upsert only.
--
CREATE FUNCTION ups_ev(tbl text, op text, id int, v text, lsn bigint) RETURNS jsonb LANGUAGE sql AS $$
  SELECT jsonb_build_object('op', op, 'source', jsonb_build_object('name', 'ups', 'schema', 'public', 'table', tbl, 'lsn', lsn, 'txId', lsn),
    'after', jsonb_build_object('id', id, 'v', v)) $$;
CREATE TABLE ups_firings (n serial, tbl text, tg text, op text, id int, v text);
-- logs its firing; an UPDATE of a 'frozen' row is suppressed
CREATE FUNCTION ups_log() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO public.ups_firings (tbl, tg, op, id, v) VALUES (TG_TABLE_NAME, TG_NAME, TG_OP, NEW.id, NEW.v);
  IF TG_OP = 'UPDATE' AND OLD.v = 'frozen' THEN
    RETURN NULL;
  END IF;
  RETURN NEW;
END $$;
-- 1. a target with a BEFORE INSERT trigger, with an outbox
CREATE TABLE ups_t (id int PRIMARY KEY, v text);
CREATE TRIGGER bi BEFORE INSERT ON ups_t FOR EACH ROW EXECUTE FUNCTION ups_log();
CREATE TRIGGER bu BEFORE UPDATE ON ups_t FOR EACH ROW EXECUTE FUNCTION ups_log();
SELECT count(*) FROM cdc.register_mapping('ups_t', source_table => 'ups_t', outbox => true);
-- 2. no insert trigger; a destination-only serial column the events lack
CREATE TABLE ups_s (id int PRIMARY KEY, v text, seq serial);
CREATE TRIGGER bu BEFORE UPDATE ON ups_s FOR EACH ROW EXECUTE FUNCTION ups_log();
SELECT count(*) FROM cdc.register_mapping('ups_s', source_table => 'ups_s', outbox => false);
SELECT cdc_apply(ups_ev('ups_t', 'c', 1, 'frozen', 10)), cdc_apply(ups_ev('ups_s', 'c', 1, 'frozen', 10));
TRUNCATE ups_firings;
-- an update of the frozen row: the BEFORE UPDATE trigger once, nothing written
SELECT cdc_apply(ups_ev('ups_t', 'u', 1, 'changed', 20)), cdc_apply(ups_ev('ups_s', 'u', 1, 'changed', 20));
SELECT tbl, tg, op, id, v FROM ups_firings ORDER BY n;
SELECT 'ups_t' AS tbl, id, v, NULL AS seq FROM ups_t UNION ALL SELECT 'ups_s', id, v, seq FROM ups_s ORDER BY 1, 2;
SELECT last_value FROM ups_s_seq_seq;
-- the same in a batch
TRUNCATE ups_firings;
SELECT events, applied FROM cdc_apply_batch(jsonb_build_array(ups_ev('ups_t', 'u', 1, 'again', 30), ups_ev('ups_s', 'u', 1, 'again', 30)));
SELECT tbl, tg, op, id, v FROM ups_firings ORDER BY n;
SELECT last_value FROM ups_s_seq_seq;
-- the outbox has the update's row, without a payload as before (the row was not written)
SELECT op, entity_key, payload FROM cdc.outbox WHERE target = 'ups_t'::regclass ORDER BY id;
-- an update of a row that is not frozen: the UPDATE only
TRUNCATE ups_firings;
SELECT cdc_apply(ups_ev('ups_t', 'c', 2, 'a', 40)), cdc_apply(ups_ev('ups_t', 'u', 2, 'b', 50));
SELECT tbl, tg, op, id, v FROM ups_firings ORDER BY n;
-- an update of a key without a row: the upsert (an insert) only
TRUNCATE ups_firings;
SELECT cdc_apply(ups_ev('ups_t', 'u', 3, 'new', 60)), cdc_apply(ups_ev('ups_s', 'u', 3, 'new', 60));
SELECT tbl, tg, op, id, v FROM ups_firings ORDER BY n;
SELECT 'ups_t' AS tbl, id, v, NULL AS seq FROM ups_t UNION ALL SELECT 'ups_s', id, v, seq FROM ups_s ORDER BY 1, 2;
-- 3. a partitioned target whose BEFORE INSERT trigger is its partition's
-- only: the partitioned table's trigger descriptor does not show it, and
-- the upsert fired it for every update (PostgreSQL's apply routes the
-- update to the partition, which fires its UPDATE triggers only).  Every
-- update of a partitioned target is written as an UPDATE first.
CREATE TABLE ups_p (id int PRIMARY KEY, v text) PARTITION BY RANGE (id);
CREATE TABLE ups_p1 PARTITION OF ups_p FOR VALUES FROM (0) TO (100);
CREATE TRIGGER bi BEFORE INSERT ON ups_p1 FOR EACH ROW EXECUTE FUNCTION ups_log();
CREATE TRIGGER bu BEFORE UPDATE ON ups_p1 FOR EACH ROW EXECUTE FUNCTION ups_log();
SELECT count(*) FROM cdc.register_mapping('ups_p', source_table => 'ups_p', outbox => true);
TRUNCATE ups_firings;
SELECT cdc_apply(ups_ev('ups_p', 'c', 1, 'a', 10)), cdc_apply(ups_ev('ups_p', 'u', 1, 'b', 20)),
       cdc_apply(ups_ev('ups_p', 'u', 1, 'frozen', 30)), cdc_apply(ups_ev('ups_p', 'u', 1, 'thawed', 40)),
       cdc_apply(ups_ev('ups_p', 'u', 2, 'new', 50));
SELECT tbl, tg, op, id, v FROM ups_firings ORDER BY n;
SELECT id, v FROM ups_p ORDER BY id;
SELECT op, entity_key, payload FROM cdc.outbox WHERE target = 'ups_p'::regclass ORDER BY id;
SELECT cdc.unregister_mapping(t) FROM unnest(ARRAY['ups_t', 'ups_s', 'ups_p']::regclass[]) t;
DROP TABLE ups_t, ups_s, ups_p, ups_firings;
DROP FUNCTION ups_ev, ups_log;
