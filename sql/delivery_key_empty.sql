--
-- delivery_key_empty (review): an empty delivery key was accepted as a real
-- key, so every delivery sent with delivery_key => '' shared one claim: the
-- second one, of another row, was a 'duplicate' and silently dropped.  An
-- empty source_partition is already refused; an empty delivery_key
-- (cdc_apply, both forms) or element of delivery_keys (cdc_apply_batch,
-- every form) is refused the same way, 22023 naming it, nothing applied.
-- NULL still means "derive it from the source identity".
-- Objects: dke*.
--
CREATE TABLE dke (id int PRIMARY KEY, v text);
-- refused by both forms of cdc_apply
SELECT cdc_apply(dbz('c', 'dke', '{"id": 1, "v": "a"}', '0/10', 1), 'dke', '');
SELECT cdc_apply(dbz('c', 'dke', '{"id": 1, "v": "a"}', '0/10', 1)::text, 'dke', delivery_key => '');
-- and by every form of the batch, naming the element; nothing of the batch applied
SELECT * FROM cdc_apply_batch(jsonb_build_array(dbz('c', 'dke', '{"id": 1, "v": "a"}', '0/10', 1),
                                                dbz('c', 'dke', '{"id": 2, "v": "b"}', '0/20', 2)),
                              'dke', ARRAY['dk-1', '']);
SELECT * FROM cdc_apply_batch(ARRAY[dbz('c', 'dke', '{"id": 1, "v": "a"}', '0/10', 1),
                                    dbz('c', 'dke', '{"id": 2, "v": "b"}', '0/20', 2)],
                              'dke', ARRAY['', NULL]);
SELECT * FROM cdc_apply_batch(jsonb_build_array(dbz('c', 'dke', '{"id": 1, "v": "a"}', '0/10', 1))::text,
                              'dke', ARRAY['']);
SELECT (SELECT count(*) FROM dke) AS rows,
       (SELECT count(*) FROM cdc.ledger WHERE target = 'dke'::regclass) AS ledger,
       (SELECT count(*) FROM cdc.entities WHERE target = 'dke'::regclass) AS entities;
-- NULL is still derived: two changes of two rows, both applied
SELECT cdc_apply(dbz('c', 'dke', '{"id": 1, "v": "a"}', '0/10', 1), 'dke', NULL);
SELECT events, applied FROM cdc_apply_batch(jsonb_build_array(dbz('c', 'dke', '{"id": 2, "v": "b"}', '0/20', 2),
                                                              dbz('c', 'dke', '{"id": 3, "v": "c"}', '0/30', 3)),
                                            'dke', ARRAY[NULL, 'dk-3']);
SELECT * FROM dke ORDER BY id;
DROP TABLE dke;
