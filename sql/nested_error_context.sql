--
-- nested_error_context: the CONTEXT line of an outer cdc_apply() or
-- cdc_apply_batch() call while a trigger on its target applies a batch of
-- its own (docs/sql-reference.md, "Errors": "CONTEXT names the target and
-- delivery key"; cdc_apply_batch(): "every error of cdc_apply(), with
-- event N of the batch (1-based) in the CONTEXT").  Found by a fresh-user
-- run: the engine's context text is one per backend (guard.cpp,
-- apply_context), so a nested call that returns clears the outer call's
-- line, and a nested call that fails leaves its own label in the outer
-- call's line.  Tables: nc_*.
--
CREATE TABLE nc_outer (id int PRIMARY KEY, note text);
CREATE TABLE nc_inner (id int PRIMARY KEY, note text NOT NULL);
SELECT 1 FROM cdc.register_mapping('nc_outer', source_table => 'nc_outer');
SELECT 1 FROM cdc.register_mapping('nc_inner', source_table => 'nc_inner');

-- note 'nest-raise': a nested batch applies, then the trigger raises
-- note 'nest-fail':  the nested batch fails (NOT NULL at its event 2)
-- note 'catch-raise': the nested batch fails, the trigger catches it, then raises
-- note 'raise':      no nested batch, the trigger raises (the reference)
CREATE FUNCTION nc_trg() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.note IN ('nest-raise', 'nest-fail') THEN
    PERFORM public.cdc_apply_batch(jsonb_build_array(
      public.dbz('c', 'nc_inner', jsonb_build_object('id', NEW.id, 'note', 'copy'), lsn => '0/' || to_hex(4096 + NEW.id), tx => NEW.id),
      public.dbz('c', 'nc_inner', jsonb_build_object('id', NEW.id + 1000, 'note', CASE WHEN NEW.note = 'nest-fail' THEN NULL ELSE 'copy' END),
                 lsn => '0/' || to_hex(8192 + NEW.id), tx => NEW.id)),
      delivery_keys => ARRAY['i1', 'i2']);
  END IF;
  IF NEW.note = 'catch-raise' THEN
    BEGIN
      PERFORM public.cdc_apply_batch(jsonb_build_array(
        public.dbz('c', 'nc_inner', jsonb_build_object('id', NEW.id, 'note', NULL), lsn => '0/' || to_hex(4096 + NEW.id), tx => NEW.id)),
        delivery_keys => ARRAY['i1']);
    EXCEPTION WHEN not_null_violation THEN
      NULL;
    END;
  END IF;
  IF NEW.note IN ('raise', 'nest-raise', 'catch-raise') THEN
    RAISE EXCEPTION 'trigger raised for %', NEW.note;
  END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER nc_trg AFTER INSERT ON nc_outer FOR EACH ROW EXECUTE FUNCTION nc_trg();

-- The cdc_apply lines of the error's CONTEXT, innermost first.
CREATE FUNCTION nc_context(note text, single boolean) RETURNS text[] LANGUAGE plpgsql AS $$
DECLARE ctx text; st text;
BEGIN
  IF single THEN
    PERFORM cdc_apply(dbz('c', 'nc_outer', jsonb_build_object('id', 2, 'note', note), lsn => '0/2000', tx => 2), NULL, 's2');
  ELSE
    PERFORM cdc_apply_batch(jsonb_build_array(
      dbz('c', 'nc_outer', '{"id": 1, "note": "ok"}', lsn => '0/1000', tx => 1),
      dbz('c', 'nc_outer', jsonb_build_object('id', 2, 'note', note), lsn => '0/2000', tx => 2)),
      delivery_keys => ARRAY['o1', 'o2']);
  END IF;
  RETURN ARRAY['no error'];
EXCEPTION WHEN OTHERS THEN
  GET STACKED DIAGNOSTICS ctx = PG_EXCEPTION_CONTEXT, st = RETURNED_SQLSTATE;
  RETURN st || cdc_context_lines(ctx);
END $$;

SELECT note, single, nc_context(note, single) AS context
  FROM unnest(ARRAY['raise', 'nest-raise', 'nest-fail', 'catch-raise']) WITH ORDINALITY AS n(note, i),
       unnest(ARRAY[false, true]) AS s(single)
 ORDER BY i, single;

-- nothing of the failed calls was kept
SELECT (SELECT count(*) FROM nc_outer) AS outer_rows, (SELECT count(*) FROM nc_inner) AS inner_rows,
       ledger_count('nc_outer') AS outer_ledger, ledger_count('nc_inner') AS inner_ledger;
