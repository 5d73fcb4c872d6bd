--
-- nested_error_context_deep (proposed by rev4; passes on integ be6127e):
-- seven levels of triggers, each applying a two-event batch to the next
-- table (dn1..dn7), with a NOT NULL, a CHECK or a RAISE at one level, caught
-- (EXCEPTION block) at another or not at all.  Every level names its own
-- event 2 and delivery key, innermost first (before the engine formatted its
-- context only when an error needs it, levels at depth >= 4 from the
-- outermost call had no line: a text buffer per depth, four of them), and
-- nothing crashes.  A
-- statement_timeout inside a three-deep call, then plain calls of the same
-- session, show the right single line.
--

DO $$ BEGIN FOR k IN 1..7 LOOP
  EXECUTE format('CREATE TABLE dn%s (id int PRIMARY KEY, note text NOT NULL CHECK (note <> ''check''))', k);
  PERFORM cdc.register_mapping(format('dn%s', k)::regclass, source_table => format('dn%s', k));
END LOOP; END $$;
-- note: 'go|F|C|kind' : at level F the 2nd event fails (kind: null|check|raise), the trigger at level C catches its nested error
CREATE FUNCTION dn_trg() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE k int := substr(TG_TABLE_NAME, 3)::int; f int; c int; kind text; nextnote text; r record;
BEGIN
  IF NEW.note NOT LIKE 'go|%' THEN RETURN NEW; END IF;
  f := split_part(NEW.note, '|', 2)::int; c := split_part(NEW.note, '|', 3)::int; kind := split_part(NEW.note, '|', 4);
  IF k = f AND kind = 'raise' THEN RAISE EXCEPTION 'raised at level %', k; END IF;
  IF k >= 7 THEN RETURN NEW; END IF;
  nextnote := CASE WHEN k + 1 = f AND kind = 'null' THEN NULL WHEN k + 1 = f AND kind = 'check' THEN 'check' ELSE NEW.note END;
  IF k = c THEN
    BEGIN
      PERFORM public.cdc_apply_batch(jsonb_build_array(
        public.dbz('c', 'dn' || (k+1), jsonb_build_object('id', NEW.id, 'note', 'leaf'), lsn => '0/' || to_hex(4096*(k+1) + NEW.id), tx => 1),
        public.dbz('c', 'dn' || (k+1), jsonb_build_object('id', NEW.id + 1000, 'note', nextnote), lsn => '0/' || to_hex(4096*(k+1) + 2048 + NEW.id), tx => 1)),
        delivery_keys => ARRAY['L' || (k+1) || 'e1-' || NEW.id, 'L' || (k+1) || 'e2-' || NEW.id]);
    EXCEPTION WHEN OTHERS THEN
      RAISE NOTICE 'level % caught % ', k, SQLSTATE;
    END;
  ELSE
    PERFORM public.cdc_apply_batch(jsonb_build_array(
      public.dbz('c', 'dn' || (k+1), jsonb_build_object('id', NEW.id, 'note', 'leaf'), lsn => '0/' || to_hex(4096*(k+1) + NEW.id), tx => 1),
      public.dbz('c', 'dn' || (k+1), jsonb_build_object('id', NEW.id + 1000, 'note', nextnote), lsn => '0/' || to_hex(4096*(k+1) + 2048 + NEW.id), tx => 1)),
      delivery_keys => ARRAY['L' || (k+1) || 'e1-' || NEW.id, 'L' || (k+1) || 'e2-' || NEW.id]);
  END IF;
  -- after the nested call, raise at own level if requested with kind 'after'
  IF k = f AND kind = 'after' THEN RAISE EXCEPTION 'after nested at level %', k; END IF;
  RETURN NEW;
END $$;
DO $$ BEGIN FOR k IN 1..7 LOOP
  EXECUTE format('CREATE TRIGGER t AFTER INSERT ON dn%s FOR EACH ROW EXECUTE FUNCTION dn_trg()', k);
END LOOP; END $$;
CREATE FUNCTION dn_ctx(note text, id int) RETURNS text[] LANGUAGE plpgsql AS $$
DECLARE ctx text; st text; msg text;
BEGIN
  PERFORM public.cdc_apply_batch(jsonb_build_array(
      public.dbz('c', 'dn1', jsonb_build_object('id', id, 'note', 'leaf'), lsn => '0/' || to_hex(100 + id), tx => 1),
      public.dbz('c', 'dn1', jsonb_build_object('id', id + 1000, 'note', note), lsn => '0/' || to_hex(2000 + id), tx => 1)),
      delivery_keys => ARRAY['top1-' || id, 'top2-' || id]);
  RETURN ARRAY['no error'];
EXCEPTION WHEN OTHERS THEN
  GET STACKED DIAGNOSTICS ctx = PG_EXCEPTION_CONTEXT, st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT;
  RETURN st || msg || cdc_context_lines(ctx);
END $$;
SELECT f, c, kind, dn_ctx(format('go|%s|%s|%s', f, c, kind), f*100 + c*10 + i) AS context FROM
  (VALUES ('null',1),('check',2),('raise',3),('after',4)) AS k(kind,i), generate_series(2,7) f, unnest(ARRAY[0,1,5]) c
  WHERE (c = 0 OR c < f)
  ORDER BY kind, f, c;
CREATE OR REPLACE FUNCTION dn_sleep() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN IF NEW.note = 'sleep' THEN PERFORM pg_sleep(5); END IF; RETURN NEW; END $$;
CREATE TRIGGER s BEFORE INSERT ON dn4 FOR EACH ROW EXECUTE FUNCTION dn_sleep();
CREATE OR REPLACE FUNCTION dn3_fwd() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN IF NEW.note = 'fwd' THEN
  PERFORM public.cdc_apply_batch(jsonb_build_array(
      public.dbz('c', 'dn4', jsonb_build_object('id', NEW.id, 'note', 'leaf'), lsn => '0/' || to_hex(50000 + NEW.id), tx => 1),
      public.dbz('c', 'dn4', jsonb_build_object('id', NEW.id+1, 'note', 'sleep'), lsn => '0/' || to_hex(60000 + NEW.id), tx => 1)),
      delivery_keys => ARRAY['f1-' || NEW.id, 'f2-' || NEW.id]);
  END IF; RETURN NEW; END $$;
CREATE TRIGGER fwd AFTER INSERT ON dn3 FOR EACH ROW EXECUTE FUNCTION dn3_fwd();
CREATE OR REPLACE FUNCTION dn2_fwd() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN IF NEW.note = 'fwd' THEN
  PERFORM public.cdc_apply(public.dbz('c', 'dn3', jsonb_build_object('id', NEW.id, 'note', 'fwd'), lsn => '0/' || to_hex(70000 + NEW.id), tx => 1), NULL, 'g-' || NEW.id);
  END IF; RETURN NEW; END $$;
CREATE TRIGGER fwd AFTER INSERT ON dn2 FOR EACH ROW EXECUTE FUNCTION dn2_fwd();
SET statement_timeout = '500ms';
SELECT public.cdc_apply_batch(jsonb_build_array(
      public.dbz('c', 'dn2', jsonb_build_object('id', 9001, 'note', 'leaf'), lsn => '0/A001', tx => 1),
      public.dbz('c', 'dn2', jsonb_build_object('id', 9002, 'note', 'fwd'), lsn => '0/A002', tx => 1)),
      delivery_keys => ARRAY['c1','c2']);
RESET statement_timeout;
SELECT public.cdc_apply_batch(jsonb_build_array(
      public.dbz('c', 'dn1', jsonb_build_object('id', 9100, 'note', NULL), lsn => '0/B001', tx => 1)),
      delivery_keys => ARRAY['n1']);
SELECT public.cdc_apply(public.dbz('c', 'dn1', jsonb_build_object('id', 9101, 'note', 'check'), lsn => '0/B002', tx => 1), NULL, 'n2');
SELECT dn_ctx('go|3|0|null', 9500) AS context;
SELECT public.cdc_apply_batch(jsonb_build_array(
      public.dbz('c', 'dn2', jsonb_build_object('id', 9201, 'note', 'leaf'), lsn => '0/C001', tx => 1),
      public.dbz('c', 'dn2', jsonb_build_object('id', 9202, 'note', 'x'), lsn => '0/C002', tx => 1)),
      delivery_keys => ARRAY['d1','d2']);
