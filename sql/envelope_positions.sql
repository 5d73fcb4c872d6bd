--
-- envelope_positions (fresh-user review): source.commit_lsn below
-- source.lsn and a negative source.txId were accepted.  A change's commit
-- LSN is at least its own LSN (docs/semantics.md "Source versions": C >= lsn
-- is what makes events with and without commit_lsn comparable), so a
-- smaller one is a broken pipeline: it was stored as the version's second
-- component and made the change look older than it is.  A PostgreSQL
-- transaction id is never negative, nor is a Debezium transaction.total_order
-- (counted from 1).  All are refused with 22023 naming the
-- field, in both forms of cdc_apply and in the batch, nothing claimed.
-- commit_lsn equal to lsn, an absent commit_lsn and a txId beyond 32 bits
-- still apply.
-- Objects: evp*.
--
CREATE TABLE evp (id int PRIMARY KEY, v text);
-- commit_lsn below lsn: refused (jsonb, text, batch)
SELECT cdc_apply(dbz('c', 'evp', '{"id": 1, "v": "a"}', '0/20', 1, clsn => '0/10'), 'evp');
SELECT cdc_apply(dbz('c', 'evp', '{"id": 1, "v": "a"}', '0/20', 1, clsn => '0/10')::text, 'evp');
SELECT * FROM cdc_apply_batch(jsonb_build_array(dbz('c', 'evp', '{"id": 2, "v": "b"}', '0/30', 2, clsn => '0/40'),
                                                dbz('c', 'evp', '{"id": 3, "v": "c"}', '0/50', 3, clsn => '0/4F')),
                              'evp');
-- PostgreSQL text LSNs too
SELECT cdc_apply('{"op": "c", "after": {"id": 1, "v": "a"},
                   "source": {"name": "srv", "schema": "public", "table": "evp", "lsn": "16/B374D848", "commit_lsn": "16/B374D847", "txId": 1}}'::jsonb, 'evp');
-- a negative txId: refused (jsonb, text, batch)
SELECT cdc_apply(dbz('c', 'evp', '{"id": 1, "v": "a"}', '0/20', -1), 'evp');
SELECT cdc_apply(dbz('c', 'evp', '{"id": 1, "v": "a"}', '0/20', -9223372036854775808)::text, 'evp');
SELECT * FROM cdc_apply_batch(ARRAY[dbz('c', 'evp', '{"id": 2, "v": "b"}', '0/30', 2),
                                    dbz('c', 'evp', '{"id": 3, "v": "c"}', '0/40', -3)],
                              'evp');
-- a negative transaction.total_order: refused (jsonb, text, batch); 0 and up still apply below
SELECT cdc_apply(dbz('c', 'evp', '{"id": 1, "v": "a"}', '0/20', 1, total_order => -1), 'evp');
SELECT cdc_apply(dbz('c', 'evp', '{"id": 1, "v": "a"}', '0/20', 1, total_order => -2147483648)::text, 'evp');
-- below 32 bits too: negative, not "at most 2147483647" (review h3)
SELECT cdc_apply(jsonb_set(dbz('c', 'evp', '{"id": 1, "v": "a"}', '0/20', 1, total_order => 1), '{transaction,total_order}', '-3000000000'), 'evp');
SELECT * FROM cdc_apply_batch(ARRAY[dbz('c', 'evp', '{"id": 2, "v": "b"}', '0/30', 2, total_order => 1),
                                    dbz('c', 'evp', '{"id": 3, "v": "c"}', '0/40', 3, total_order => -5)],
                              'evp');
SELECT (SELECT count(*) FROM evp) AS rows,
       (SELECT count(*) FROM cdc.ledger WHERE target = 'evp'::regclass) AS ledger,
       (SELECT count(*) FROM cdc.entities WHERE target = 'evp'::regclass) AS entities;
-- still applied: commit_lsn equal to lsn, above it, absent; txId 0 and beyond 32 bits
SELECT cdc_apply(dbz('c', 'evp', '{"id": 1, "v": "a"}', '0/20', 0, clsn => '0/20'), 'evp');
SELECT cdc_apply(dbz('c', 'evp', '{"id": 2, "v": "b"}', '0/30', 4294967296, clsn => '0/38')::text, 'evp');
SELECT events, applied FROM cdc_apply_batch(jsonb_build_array(dbz('c', 'evp', '{"id": 3, "v": "c"}', '0/40', 9223372036854775807, total_order => 0),
                                                              dbz('u', 'evp', '{"id": 1, "v": "a2"}', '0/50', 5)),
                                            'evp');
SELECT * FROM evp ORDER BY id;
DROP TABLE evp;
