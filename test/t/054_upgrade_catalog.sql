-- Used by test/t/054_upgrade.pl: everything extension cdc_apply consists of
-- (members, columns, defaults, indexes, constraints, triggers, policies, view
-- and function definitions, sequences, comments, privileges and initial
-- privileges, dependencies), one line per fact and without oids, so that an
-- updated installation and a fresh one can be compared line by line (line
-- breaks of definitions are written as \n).
WITH ext AS (SELECT oid FROM pg_extension WHERE extname = 'cdc_apply'),
members AS (
  SELECT d.classid, d.objid FROM pg_depend d, ext
   WHERE d.refclassid = 'pg_extension'::regclass AND d.refobjid = ext.oid AND d.deptype = 'e'),
rels AS (
  SELECT c.* FROM pg_class c JOIN members m ON m.classid = 'pg_class'::regclass AND m.objid = c.oid),
parts AS (
  -- members and the objects belonging to member relations
  SELECT m.classid, m.objid FROM members m
  UNION SELECT 'pg_class'::regclass, i.indexrelid FROM pg_index i JOIN rels r ON r.oid = i.indrelid
  UNION SELECT 'pg_constraint'::regclass, c.oid FROM pg_constraint c JOIN rels r ON r.oid = c.conrelid
  UNION SELECT 'pg_trigger'::regclass, t.oid FROM pg_trigger t JOIN rels r ON r.oid = t.tgrelid
  UNION SELECT 'pg_policy'::regclass, p.oid FROM pg_policy p JOIN rels r ON r.oid = p.polrelid
  UNION SELECT 'pg_rewrite'::regclass, w.oid FROM pg_rewrite w JOIN rels r ON r.oid = w.ev_class
)
SELECT replace(regexp_replace(line, 'RI_ConstraintTrigger_([ac])_[0-9]+', 'RI_ConstraintTrigger_\1_N', 'g'), E'\n', '\n') AS line FROM (
  SELECT 'member ' || pg_describe_object(m.classid, m.objid, 0) AS line FROM members m
  UNION ALL
  SELECT 'comment ' || pg_describe_object(d.classoid, d.objoid, d.objsubid) || ': ' || d.description
    FROM pg_description d JOIN parts p ON p.classid = d.classoid AND p.objid = d.objoid
  UNION ALL
  SELECT 'init privs ' || pg_describe_object(i.classoid, i.objoid, i.objsubid) || ': ' || i.initprivs::text || ' ' || i.privtype::text
    FROM pg_init_privs i JOIN parts p ON p.classid = i.classoid AND p.objid = i.objoid
  UNION ALL
  SELECT 'relation ' || r.oid::regclass::text || ' kind ' || r.relkind::text || ' persistence ' || r.relpersistence::text
         || ' options ' || coalesce(r.reloptions::text, '-') || ' rls ' || r.relrowsecurity || '/' || r.relforcerowsecurity
         || ' acl ' || coalesce(r.relacl::text, '-') || ' owner ' || pg_get_userbyid(r.relowner)
         || ' am ' || coalesce((SELECT amname FROM pg_am WHERE oid = r.relam), '-')
         || ' tablespace ' || r.reltablespace || ' replident ' || r.relreplident::text
    FROM rels r
  UNION ALL
  SELECT 'column ' || r.oid::regclass::text || ' #' || a.attnum || ' ' || a.attname || ' ' || format_type(a.atttypid, a.atttypmod)
         || CASE WHEN a.attnotnull THEN ' not null' ELSE '' END
         || coalesce(' default ' || pg_get_expr(ad.adbin, ad.adrelid), '')
         || ' identity ' || a.attidentity::text || ' generated ' || a.attgenerated::text || ' storage ' || a.attstorage::text
         || ' collation ' || coalesce((SELECT collname FROM pg_collation WHERE oid = a.attcollation), '-')
         || ' stats ' || a.attstattarget || ' acl ' || coalesce(a.attacl::text, '-')
    FROM rels r JOIN pg_attribute a ON a.attrelid = r.oid AND a.attnum > 0 AND NOT a.attisdropped
    LEFT JOIN pg_attrdef ad ON ad.adrelid = a.attrelid AND ad.adnum = a.attnum
  UNION ALL
  SELECT 'index ' || r.oid::regclass::text || ': ' || pg_get_indexdef(i.indexrelid)
         || ' primary ' || i.indisprimary || ' clustered ' || i.indisclustered || ' replident ' || i.indisreplident
    FROM rels r JOIN pg_index i ON i.indrelid = r.oid
  UNION ALL
  SELECT 'constraint ' || r.oid::regclass::text || ' ' || c.conname || ': ' || pg_get_constraintdef(c.oid)
         || ' deferrable ' || c.condeferrable || '/' || c.condeferred || ' valid ' || c.convalidated
    FROM rels r JOIN pg_constraint c ON c.conrelid = r.oid
  UNION ALL
  SELECT 'trigger ' || pg_get_triggerdef(t.oid) || ' enabled ' || t.tgenabled::text
    FROM rels r JOIN pg_trigger t ON t.tgrelid = r.oid
  UNION ALL
  SELECT 'policy ' || p.schemaname || '.' || p.tablename || ' ' || p.policyname || ' ' || p.permissive || ' ' || p.roles::text
         || ' ' || p.cmd || ' using ' || coalesce(p.qual, '-') || ' check ' || coalesce(p.with_check, '-')
    FROM pg_policies p JOIN rels r ON r.relname = p.tablename AND r.relnamespace::regnamespace::text = p.schemaname
  UNION ALL
  SELECT 'view ' || r.oid::regclass::text || ': ' || pg_get_viewdef(r.oid) FROM rels r WHERE r.relkind IN ('v', 'm')
  UNION ALL
  SELECT 'sequence ' || r.oid::regclass::text || ' ' || format_type(s.seqtypid, NULL) || ' start ' || s.seqstart
         || ' increment ' || s.seqincrement || ' max ' || s.seqmax || ' min ' || s.seqmin || ' cache ' || s.seqcache
         || ' cycle ' || s.seqcycle
         || ' owned by ' || coalesce((SELECT pg_describe_object(d.refclassid, d.refobjid, d.refobjsubid) FROM pg_depend d
                                       WHERE d.classid = 'pg_class'::regclass AND d.objid = r.oid AND d.deptype IN ('a', 'i')
                                         AND d.refclassid = 'pg_class'::regclass LIMIT 1), '-')
    FROM rels r JOIN pg_sequence s ON s.seqrelid = r.oid
  UNION ALL
  SELECT 'function ' || p.oid::regprocedure::text || ' acl ' || coalesce(p.proacl::text, '-') || ' owner '
         || pg_get_userbyid(p.proowner) || E'\n' || pg_get_functiondef(p.oid)
    FROM pg_proc p JOIN members m ON m.classid = 'pg_proc'::regclass AND m.objid = p.oid
  UNION ALL
  SELECT 'type ' || t.oid::regtype::text || ' kind ' || t.typtype::text || ' acl ' || coalesce(t.typacl::text, '-')
    FROM pg_type t JOIN members m ON m.classid = 'pg_type'::regclass AND m.objid = t.oid
  UNION ALL
  SELECT 'schema ' || n.nspname || ' acl ' || coalesce(n.nspacl::text, '-') || ' owner ' || pg_get_userbyid(n.nspowner)
    FROM pg_namespace n JOIN members m ON m.classid = 'pg_namespace'::regclass AND m.objid = n.oid
  UNION ALL
  -- dependencies between parts (a view on its tables, a default on its sequence, ...)
  SELECT 'depends ' || pg_describe_object(d.classid, d.objid, d.objsubid) || ' -> '
         || pg_describe_object(d.refclassid, d.refobjid, d.refobjsubid) || ' ' || d.deptype::text
    FROM pg_depend d JOIN parts p ON p.classid = d.classid AND p.objid = d.objid
   WHERE d.deptype <> 'e' AND d.refclassid <> 'pg_namespace'::regclass
     AND NOT (d.refclassid = 'pg_type'::regclass AND d.refobjid < 16384)
     AND NOT (d.refclassid = 'pg_proc'::regclass AND d.refobjid < 16384)
     AND NOT (d.refclassid = 'pg_collation'::regclass)
  UNION ALL
  SELECT 'extension version ' || e.extversion || ' schema ' || e.extnamespace::regnamespace::text || ' relocatable '
         || e.extrelocatable || ' config ' || coalesce((SELECT string_agg(u.c::regclass::text || ' ' || pg_catalog.quote_literal(u.cond), ', ' ORDER BY u.c::regclass::text) FROM unnest(e.extconfig::oid[], e.extcondition) AS u(c, cond)), '-')
    FROM pg_extension e WHERE e.extname = 'cdc_apply'
) x
ORDER BY line COLLATE "C";
