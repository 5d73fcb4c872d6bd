--
-- delivery_key_limit (review): a delivery key is bounded like the event it
-- names.  A 50 MB delivery key was accepted and stored in cdc.conflicts
-- (and would be in cdc.dead_letter, a history table's cdc_delivery_key and
-- every error's CONTEXT).  The ledger stores only a 64-bit digest of the
-- key and no column holding it is indexed, so the bound is
-- cdc.max_event_size: a longer delivery_key (cdc_apply) or element of
-- delivery_keys (cdc_apply_batch, every form) is refused with 54000 naming
-- it and the limit, before the event is parsed, with nothing applied.
-- Objects: dkl_*.
--
CREATE TABLE dkl (id int PRIMARY KEY, v text);
SET cdc.max_event_size = 1;  -- 1 kB: 1,024 bytes
-- one byte over the limit: refused by both forms of cdc_apply
SELECT cdc_apply(dbz('c', 'dkl', '{"id": 1, "v": "a"}', '0/10', 1), 'dkl', repeat('k', 1025));
SELECT cdc_apply(dbz('c', 'dkl', '{"id": 1, "v": "a"}', '0/10', 1)::text, 'dkl', repeat('k', 1025));
-- counted in bytes, not characters
SELECT cdc_apply(dbz('c', 'dkl', '{"id": 1, "v": "a"}', '0/10', 1), 'dkl', repeat('é', 513));
-- and by every form of the batch, naming the element; nothing of the batch applied
SELECT * FROM cdc_apply_batch(jsonb_build_array(dbz('c', 'dkl', '{"id": 1, "v": "a"}', '0/10', 1),
                                                dbz('c', 'dkl', '{"id": 2, "v": "b"}', '0/20', 2)),
                              'dkl', ARRAY['dk-1', repeat('k', 1025)]);
SELECT * FROM cdc_apply_batch(ARRAY[dbz('c', 'dkl', '{"id": 1, "v": "a"}', '0/10', 1),
                                    dbz('c', 'dkl', '{"id": 2, "v": "b"}', '0/20', 2)],
                              'dkl', ARRAY[repeat('k', 1025), NULL]);
SELECT * FROM cdc_apply_batch(jsonb_build_array(dbz('c', 'dkl', '{"id": 1, "v": "a"}', '0/10', 1))::text,
                              'dkl', ARRAY[repeat('k', 1025)]);
SELECT (SELECT count(*) FROM dkl) AS rows,
       (SELECT count(*) FROM cdc.ledger WHERE target = 'dkl'::regclass) AS ledger,
       (SELECT count(*) FROM cdc.entities WHERE target = 'dkl'::regclass) AS entities,
       (SELECT count(*) FROM cdc.conflicts WHERE target = 'dkl'::regclass) AS conflicts;
-- at the limit: applied, and its redelivery is a duplicate
SELECT cdc_apply(dbz('c', 'dkl', '{"id": 1, "v": "a"}', '0/10', 1), 'dkl', repeat('k', 1024));
SELECT cdc_apply(dbz('c', 'dkl', '{"id": 1, "v": "a"}', '0/10', 1), 'dkl', repeat('k', 1024));
SELECT cdc_apply(dbz('c', 'dkl', '{"id": 3, "v": "c"}', '0/30', 3), 'dkl', repeat('é', 512));
SELECT events, applied FROM cdc_apply_batch(jsonb_build_array(dbz('c', 'dkl', '{"id": 2, "v": "b"}', '0/20', 2)),
                                            'dkl', ARRAY[repeat('k', 1023) || '2']);
SELECT * FROM dkl ORDER BY id;
RESET cdc.max_event_size;
-- the reviewer's case, at the default limit (16 MB): a 17 MB key is refused
SELECT cdc_apply(dbz('c', 'dkl', '{"id": 4, "v": "d"}', '0/40', 4), 'dkl', repeat('k', 17 * 1024 * 1024));
SELECT count(*) AS rows FROM dkl;
DROP TABLE dkl;
