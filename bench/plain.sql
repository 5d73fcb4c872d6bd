-- Method 1 of the benchmark (bench/run.sh): a plain upsert sink with no
-- guarantees at all — the ceiling.  It receives the same batches of
-- Debezium envelopes as the other methods (a JSON array per source
-- transaction) and applies them with one DELETE and one
-- INSERT ... ON CONFLICT DO UPDATE per batch.  One statement cannot touch a
-- row twice, so it first keeps the last change of each key in the batch
-- (what a JDBC sink's "reduction buffer" does).  Correct only when every
-- change arrives exactly once and in order: no dedup, no versions, no
-- tombstones, no outbox.

CREATE FUNCTION plain_upsert_batch(events jsonb) RETURNS bigint
LANGUAGE sql
AS $$
  WITH ev AS (
    SELECT ord, e->>'op' AS op, CASE WHEN e->>'op' = 'd' THEN e->'before' ELSE e->'after' END AS img
      FROM jsonb_array_elements(events) WITH ORDINALITY AS a(e, ord)),
  last AS (
    SELECT DISTINCT ON (id) id, op, img
      FROM (SELECT (img->>'id')::bigint AS id, op, img, ord FROM ev) x
     ORDER BY id, ord DESC),
  del AS (
    DELETE FROM orders o USING last WHERE last.op = 'd' AND o.id = last.id RETURNING 1),
  ups AS (
    INSERT INTO orders
    SELECT r.* FROM last, jsonb_populate_record(NULL::orders, last.img) AS r WHERE last.op <> 'd'
    ON CONFLICT (id) DO UPDATE
       SET customer_id = EXCLUDED.customer_id, status = EXCLUDED.status, amount = EXCLUDED.amount,
           note = EXCLUDED.note, updated_at = EXCLUDED.updated_at
    RETURNING 1)
  SELECT (SELECT count(*) FROM del) + (SELECT count(*) FROM ups)
$$;

-- Method 1b: the same sink without the reduction — one INSERT ... ON
-- CONFLICT DO UPDATE or DELETE statement per change, a batch per call.
CREATE FUNCTION plain_upsert_each(events jsonb) RETURNS bigint
LANGUAGE plpgsql
AS $$
DECLARE
  e jsonb;
  n bigint := 0;
BEGIN
  FOR e IN SELECT value FROM jsonb_array_elements(events) LOOP
    IF e->>'op' = 'd' THEN
      DELETE FROM orders WHERE id = (e->'before'->>'id')::bigint;
    ELSE
      INSERT INTO orders SELECT * FROM jsonb_populate_record(NULL::orders, e->'after')
      ON CONFLICT (id) DO UPDATE
         SET customer_id = EXCLUDED.customer_id, status = EXCLUDED.status, amount = EXCLUDED.amount,
             note = EXCLUDED.note, updated_at = EXCLUDED.updated_at;
    END IF;
    n := n + 1;
  END LOOP;
  RETURN n;
END
$$;
