-- The scenario of insert_first_records.sql, run once per setting of
-- cdc.direct_writes and outbox: psql variables tbl (the target, created
-- here), dw (on or off) and outbox.  Included with \i; not a test of its own.
CREATE TABLE :tbl (id int PRIMARY KEY, v text);
SELECT target FROM cdc.register_mapping(:'tbl', source_table => :'tbl', outbox => :outbox);
SET ifr.tbl = :'tbl';
SET cdc.direct_writes = :dw;
\echo R1 rows 1-4 loaded before cdc_apply: no entity records
INSERT INTO :tbl SELECT g, 'preloaded' FROM generate_series(1, 4) g;
SELECT pg_stat_force_next_flush();
SELECT FROM ifr_writes(:'tbl');
\echo R2 a re-snapshot of 1-4 (op r) and new keys 5-6 (op c, r): the first taken key turns the hint off (direct writes: one taken-back insert, every key looked up)
SELECT applied, duplicate, stale FROM cdc_apply_batch(jsonb_build_array(ifr_ev('r',1,'s1',100), ifr_ev('r',2,'s2',100), ifr_ev('c',5,'n5',110),
  ifr_ev('r',3,'s3',100), ifr_ev('r',4,'s4',100), ifr_ev('r',6,'n6',100)), :'tbl'::regclass);
SELECT pg_stat_force_next_flush();
\if :dw
SELECT * FROM ifr_writes(:'tbl');
\endif
\echo R3 new keys only, one sent as an update: every hint right (direct writes: no key looked up)
SELECT applied, duplicate, stale FROM cdc_apply_batch(jsonb_build_array(ifr_ev('c',7,'n7',200), ifr_ev('u',8,'n8',200), ifr_ev('c',9,'n9',200),
  ifr_ev('u',7,'n7b',210)), :'tbl'::regclass);
SELECT pg_stat_force_next_flush();
\if :dw
SELECT * FROM ifr_writes(:'tbl');
\endif
\echo R4 op c for keys with live records (1 and 7): found and updated (direct writes: at the location this session last saw their rows, no index look-up: cdc.row_location_cache)
SELECT applied, duplicate, stale FROM cdc_apply_batch(jsonb_build_array(ifr_ev('c',1,'c1',300), ifr_ev('c',7,'c7',300)), :'tbl'::regclass);
SELECT pg_stat_force_next_flush();
\if :dw
SELECT * FROM ifr_writes(:'tbl');
\endif
\echo R5 deletes: 2 and 9 become tombstones
SELECT applied, duplicate, stale FROM cdc_apply_batch(jsonb_build_array(ifr_ev('d',2,NULL,400), ifr_ev('d',9,NULL,400)), :'tbl'::regclass);
\echo R6 after the tombstones: 2 re-created by an update, 9 by a create, a stale create of 9, a replay of R5
SELECT applied, duplicate, stale FROM cdc_apply_batch(jsonb_build_array(ifr_ev('u',2,'back2',500), ifr_ev('c',9,'back9',500),
  ifr_ev('c',9,'old9',350), ifr_ev('d',2,NULL,400)), :'tbl'::regclass);
\echo R7 a key deleted and re-created in one batch, and a key whose row a session removed behind cdc_apply (its record is live: looked up, inserted)
DELETE FROM :tbl WHERE id = 3;
SELECT applied, duplicate, stale FROM cdc_apply_batch(jsonb_build_array(ifr_ev('d',5,NULL,600), ifr_ev('c',5,'again5',610),
  ifr_ev('u',3,'u3',600)), :'tbl'::regclass);
\echo R8 a row a session inserted behind cdc_apply for a tombstoned key (2 is deleted again first): the hint is wrong once (direct writes: one taken-back insert, both keys looked up)
SELECT applied, duplicate, stale FROM cdc_apply_batch(jsonb_build_array(ifr_ev('d',2,NULL,700)), :'tbl'::regclass);
INSERT INTO :tbl VALUES (2, 'behind');
SELECT pg_stat_force_next_flush();
SELECT FROM ifr_writes(:'tbl');
SELECT applied, duplicate, stale FROM cdc_apply_batch(jsonb_build_array(ifr_ev('u',2,'over2',800), ifr_ev('c',10,'n10',800)), :'tbl'::regclass);
SELECT pg_stat_force_next_flush();
\if :dw
SELECT * FROM ifr_writes(:'tbl');
\endif
\echo result
SELECT id, v FROM :tbl ORDER BY id;
SELECT key, deleted FROM cdc.entity_state WHERE target = :'tbl'::regclass ORDER BY key;
SELECT applied, duplicate, stale, conflict, outbox_rows FROM cdc.stats WHERE target = :'tbl'::regclass;
SELECT op, entity_key, payload FROM cdc.outbox WHERE target = :'tbl'::regclass ORDER BY id;
INSERT INTO ifr_result
  SELECT :'tbl', 'entity records', string_agg(format('%s|%s|%s|%s|%s|%s|%s', key, v0, v1, v2, v3, deleted, chash), ';' ORDER BY key)
    FROM cdc.entity_state WHERE target = :'tbl'::regclass
  UNION ALL SELECT :'tbl', 'rows', string_agg(format('%s|%s', id, v), ';' ORDER BY id) FROM :tbl
  UNION ALL SELECT :'tbl', 'outbox', coalesce(string_agg(format('%s|%s|%s|%s', op, entity_key, payload, version), ';' ORDER BY id), '')
    FROM cdc.outbox WHERE target = :'tbl'::regclass
  UNION ALL SELECT :'tbl', 'stats', format('%s|%s|%s|%s|%s', applied, duplicate, stale, conflict, outbox_rows) FROM cdc.stats WHERE target = :'tbl'::regclass;
RESET cdc.direct_writes;
