--
-- key_text_equal_values: equal key values of array and composite types
-- must name one entity record, as numeric 1 and 1.0 and float 0 and -0 do
-- for scalar keys (KeyTextPg: trim_scale, -0 as 0).  Found in review of
-- the settled output of containers: elements and attributes print through
-- the output function as given, so '{1.0}' and '{1}' (equal numeric[]
-- values, one row of the target) got two entity records, and an older
-- change of a deleted row was applied (the row resurrected) where stale is
-- right.  Key texts of containers are normalised as scalars' are
-- (KeyTextPg, NormaliseNumbersPg in src/pg/apply/image.cpp).
--
CREATE TABLE ktev_n (k numeric[] PRIMARY KEY, v text);
CREATE TABLE ktev_f (k float8[] PRIMARY KEY, v text);
CREATE TYPE ktev_t AS (n numeric, f float8);
CREATE TABLE ktev_c (k ktev_t PRIMARY KEY, v text);
SELECT target FROM cdc.register_mapping('ktev_n');
SELECT target FROM cdc.register_mapping('ktev_f');
SELECT target FROM cdc.register_mapping('ktev_c');
CREATE FUNCTION ktev_ev(tbl text, op text, k jsonb, v text, lsn bigint) RETURNS jsonb LANGUAGE sql AS $$
  SELECT jsonb_build_object('op', op, 'source', jsonb_build_object('name', 'ktev', 'schema', 'public', 'table', tbl, 'lsn', lsn, 'txId', lsn),
    'before', CASE WHEN op = 'd' THEN jsonb_build_object('k', k) END,
    'after', CASE WHEN op <> 'd' THEN jsonb_build_object('k', k, 'v', v) END) $$;
-- the values are equal (one row of the target)
SELECT '{1.0}'::numeric[] = '{1}'::numeric[] AS numeric_arrays_equal, '{-0}'::float8[] = '{0}'::float8[] AS float_arrays_equal,
       ROW(1.0, '-0')::ktev_t = ROW(1, 0)::ktev_t AS composites_equal;
-- created under one spelling, deleted under the other, an older update under the first: stale, one record
SELECT cdc_apply(ktev_ev('ktev_n', 'c', '[1.0]', 'new', 2000)) AS c, cdc_apply(ktev_ev('ktev_n', 'd', '[1]', NULL, 3000)) AS d,
       cdc_apply(ktev_ev('ktev_n', 'u', '[1.0]', 'OLD', 2500)) AS older_u;
SELECT * FROM ktev_n;
SELECT count(*) AS entity_records FROM cdc.entity_state WHERE target = 'ktev_n'::regclass;
SELECT cdc_apply(ktev_ev('ktev_f', 'c', '"{-0}"', 'new', 2000)) AS c, cdc_apply(ktev_ev('ktev_f', 'd', '"{0}"', NULL, 3000)) AS d,
       cdc_apply(ktev_ev('ktev_f', 'u', '"{-0}"', 'OLD', 2500)) AS older_u;
SELECT * FROM ktev_f;
SELECT count(*) AS entity_records FROM cdc.entity_state WHERE target = 'ktev_f'::regclass;
SELECT cdc_apply(ktev_ev('ktev_c', 'c', '"(1.0,-0)"', 'new', 2000)) AS c, cdc_apply(ktev_ev('ktev_c', 'd', '"(1,0)"', NULL, 3000)) AS d,
       cdc_apply(ktev_ev('ktev_c', 'u', '"(1.0,-0)"', 'OLD', 2500)) AS older_u;
SELECT * FROM ktev_c;
SELECT count(*) AS entity_records FROM cdc.entity_state WHERE target = 'ktev_c'::regclass;
-- cdc._key_text, which the engine's statements match rows by, agrees
SELECT cdc._key_text('{1.0}'::numeric[]) = cdc._key_text('{1}'::numeric[]) AS numeric_arrays,
       cdc._key_text('{-0}'::float8[]) = cdc._key_text('{0}'::float8[]) AS float_arrays,
       cdc._key_text(ROW(1.0, '-0')::ktev_t) = cdc._key_text(ROW(1, 0)::ktev_t) AS composites;
-- ranges, multiranges, arrays of composites, domains; and the texts themselves
CREATE DOMAIN ktev_d AS numeric[];
SELECT cdc._key_text(numrange(1.0, 2.50)) = cdc._key_text(numrange(1, 2.5)) AS ranges,
       cdc._key_text(nummultirange(numrange(1.0, 2.0), numrange(3.00, NULL))) = cdc._key_text(nummultirange(numrange(1, 2), numrange(3, NULL))) AS multiranges,
       cdc._key_text(ARRAY[ROW(1.0, '-0')::ktev_t]) = cdc._key_text(ARRAY[ROW(1, 0)::ktev_t]) AS arrays_of_composites,
       cdc._key_text('{1.0}'::ktev_d) = cdc._key_text('{1}'::ktev_d) AS domains;
SELECT cdc._key_text('{1.10,NULL,-0.0}'::numeric[]) AS numeric_array, cdc._key_text(numrange(1.0, 2.50)) AS num_range,
       cdc._key_text(ROW(1.0, '-0')::ktev_t) AS composite, cdc._key_text('{{1.0,2},{3,4.00}}'::numeric[]) AS two_dimensions,
       cdc._key_text('[0:1]={1.0,2}'::numeric[]) AS lower_bound_kept, cdc._key_text('empty'::numrange) AS empty_range;
DROP DOMAIN ktev_d;
DROP TABLE ktev_n, ktev_f, ktev_c;
DROP TYPE ktev_t;
DROP FUNCTION ktev_ev(text, text, jsonb, text, bigint);
