-- Method 2 of the benchmark (bench/run.sh): what a careful user writes by
-- hand in PL/pgSQL to get the guarantees cdc_apply() gives, for this one
-- table.  Per change:
--
--   1. dedup claim:   the delivery key goes into a ledger under a primary
--                     key; already there -> 'duplicate', nothing else;
--   2. version check: the entity's (commit LSN, LSN) only moves forward;
--                     an older (or equal) change -> 'stale', nothing else;
--   3. tombstone:     a delete keeps the key's version (deleted = true), so
--                     an older insert or update cannot bring the row back;
--   4. mutation:      upsert of the after-image, or delete;
--   5. outbox row:    one row per applied change with a stable idempotency
--                     key (the source identity), unique in the outbox.
--
-- Everything runs in the caller's transaction.  The version check and the
-- tombstone are one INSERT ... ON CONFLICT DO UPDATE ... WHERE, so two
-- sessions applying changes of the same key serialise on the version row.

CREATE SCHEMA ref;

CREATE TABLE ref.ledger (
  delivery_key text PRIMARY KEY,
  claimed_at   timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE ref.entity_version (
  id         bigint PRIMARY KEY,
  commit_lsn bigint NOT NULL,
  lsn        bigint NOT NULL,
  deleted    boolean NOT NULL,
  updated_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE ref.outbox (
  id              bigserial PRIMARY KEY,
  idempotency_key text NOT NULL UNIQUE,
  op              text NOT NULL,
  payload         jsonb,
  created_at      timestamptz NOT NULL DEFAULT now()
);

-- Applies one Debezium envelope (bare payload) to public.orders.
CREATE FUNCTION ref.apply(event jsonb) RETURNS text
LANGUAGE plpgsql
AS $$
DECLARE
  op         text   := event->>'op';
  src        jsonb  := event->'source';
  lsn        bigint := (src->>'lsn')::bigint;
  commit_lsn bigint := coalesce((src->>'commit_lsn')::bigint, lsn);
  img        jsonb  := CASE WHEN op = 'd' THEN event->'before' ELSE event->'after' END;
  key        bigint := (img->>'id')::bigint;
  dk         text   := concat_ws(':', src->>'name', src->>'schema', src->>'table', op, lsn, src->>'txId', key);
BEGIN
  -- 1. dedup claim
  INSERT INTO ref.ledger (delivery_key) VALUES (dk) ON CONFLICT DO NOTHING;
  IF NOT FOUND THEN
    RETURN 'duplicate';
  END IF;

  -- 2. + 3. version check and tombstone, in one statement
  INSERT INTO ref.entity_version AS v (id, commit_lsn, lsn, deleted)
  VALUES (key, commit_lsn, lsn, op = 'd')
  ON CONFLICT (id) DO UPDATE
     SET commit_lsn = EXCLUDED.commit_lsn, lsn = EXCLUDED.lsn, deleted = EXCLUDED.deleted, updated_at = now()
   WHERE (v.commit_lsn, v.lsn) < (EXCLUDED.commit_lsn, EXCLUDED.lsn);
  IF NOT FOUND THEN
    RETURN 'stale';
  END IF;

  -- 4. mutation
  IF op = 'd' THEN
    DELETE FROM orders WHERE id = key;
  ELSE
    INSERT INTO orders SELECT * FROM jsonb_populate_record(NULL::orders, img)
    ON CONFLICT (id) DO UPDATE
       SET customer_id = EXCLUDED.customer_id, status = EXCLUDED.status, amount = EXCLUDED.amount,
           note = EXCLUDED.note, updated_at = EXCLUDED.updated_at;
  END IF;

  -- 5. outbox row (not for snapshot reads)
  IF op <> 'r' THEN
    INSERT INTO ref.outbox (idempotency_key, op, payload)
    VALUES (md5(concat_ws(':', src->>'name', src->>'schema', src->>'table', op, commit_lsn, lsn, key)), op, img)
    ON CONFLICT (idempotency_key) DO NOTHING;
  END IF;
  RETURN 'applied';
END
$$;

-- The same for a batch: a JSON array of envelopes, applied in order in one
-- call.  Returns the number of applied changes.
CREATE FUNCTION ref.apply_batch(events jsonb) RETURNS bigint
LANGUAGE plpgsql
AS $$
DECLARE
  e jsonb;
  n bigint := 0;
BEGIN
  FOR e IN SELECT value FROM jsonb_array_elements(events) LOOP
    IF ref.apply(e) = 'applied' THEN
      n := n + 1;
    END IF;
  END LOOP;
  RETURN n;
END
$$;
