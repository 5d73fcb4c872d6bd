--
-- nested_error_context_depth17 (hostile review h3 of 46e1db9): seventeen
-- nested calls (a trigger on dd17 applies a two-event batch to dd17 again),
-- the innermost's event 2 names a column the table lacks (a C++ InputError:
-- its engine is gone before the ERROR is raised, so its line is the copy
-- ReleaseErrorContextSource made).  Every level's line shows, innermost
-- first.  Failed on 46e1db9: the copy buffers stopped at depth 16, so the
-- one line missing was the failing call's own (L17-2), while the sixteen
-- calls around it, whose engines are alive, all had theirs; the line is now
-- kept in the call's own ApplyContext.  Tables: dd17.
--
CREATE TABLE dd17 (id bigint PRIMARY KEY, lvl int, tgt int, note text);
SELECT 1 FROM cdc.register_mapping('dd17', source_table => 'dd17');
CREATE FUNCTION dd17_trg() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.note = 'go' AND NEW.lvl < NEW.tgt THEN
    PERFORM public.cdc_apply_batch(jsonb_build_array(
      public.dbz('c', 'dd17', jsonb_build_object('id', NEW.id * 2, 'lvl', NEW.lvl + 1, 'tgt', NEW.tgt, 'note', 'leaf'),
                 lsn => '0/' || to_hex(4096 + NEW.id * 2), tx => NEW.id),
      public.dbz('c', 'dd17', CASE WHEN NEW.lvl + 1 = NEW.tgt THEN jsonb_build_object('id', NEW.id * 2 + 1, 'zz', 1)
                                   ELSE jsonb_build_object('id', NEW.id * 2 + 1, 'lvl', NEW.lvl + 1, 'tgt', NEW.tgt, 'note', 'go') END,
                 lsn => '0/' || to_hex(4097 + NEW.id * 2), tx => NEW.id)),
      delivery_keys => ARRAY['L' || (NEW.lvl + 1) || '-1', 'L' || (NEW.lvl + 1) || '-2']);
  END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER dd17_trg AFTER INSERT ON dd17 FOR EACH ROW EXECUTE FUNCTION dd17_trg();

-- The cdc_apply lines of the error's CONTEXT, innermost first.
CREATE FUNCTION dd17_context(tgt int) RETURNS text[] LANGUAGE plpgsql AS $$
DECLARE ctx text; st text;
BEGIN
  PERFORM cdc_apply(dbz('c', 'dd17', jsonb_build_object('id', 1, 'lvl', 0, 'tgt', tgt, 'note', 'go'), lsn => '0/1000', tx => 1), NULL, 'L0');
  RETURN ARRAY['no error'];
EXCEPTION WHEN OTHERS THEN
  GET STACKED DIAGNOSTICS ctx = PG_EXCEPTION_CONTEXT, st = RETURNED_SQLSTATE;
  RETURN st || cdc_context_lines(ctx);
END $$;

SELECT n, line FROM unnest(dd17_context(17)) WITH ORDINALITY AS u(line, n) ORDER BY n;

SELECT count(*) AS rows_kept FROM dd17;
