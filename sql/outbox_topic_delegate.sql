--
-- outbox_topic_delegate (review h2): docs/security.md, "Delegating
-- mappings": a delegate (a role granted INSERT/UPDATE on cdc.mapping and
-- EXECUTE on cdc.register_mapping) writes only the mappings of its own
-- tables, "so it cannot attach its handler or an outbox to someone else's
-- table".  But the topic of outbox rows is free text of the mapping:
-- the delegate names another target's topic as the outbox_topic of its own
-- table, and every change applied to its table (by itself, through
-- cdc_apply()) becomes a cdc.outbox row of that topic, which a relay
-- publishes into the other tenant's stream (the same forgery as
-- sql/outbox_message_forged.sql, through the table outbox).  With the
-- source identity of the other table, the row also carries that table's
-- idempotency key.  Expected: a delegate may not name a topic that is
-- another mapping's (explicit or default) unless it may act as that
-- mapping's target owner: 42501.  Objects: h2ot_*.
--
CREATE TABLE h2ot_payments (id int PRIMARY KEY, amount int);
SELECT outbox, outbox_topic FROM cdc.register_mapping('h2ot_payments', outbox => true);
SELECT outbox, outbox_topic FROM cdc.register_mapping('h2ot_payments', outbox => true, outbox_topic => 'h2ot.payments.v1');
CREATE ROLE h2ot_del;
CREATE SCHEMA h2ot AUTHORIZATION h2ot_del;
GRANT INSERT, UPDATE, DELETE ON cdc.mapping TO h2ot_del;
GRANT EXECUTE ON FUNCTION cdc.register_mapping(regclass, text, text, name[], name, boolean, text, text, text, text,
                                               bigint, text, text, text, regprocedure, text, text) TO h2ot_del;
-- what a statement raises, by SQLSTATE only (the message is the fix's to word)
CREATE FUNCTION h2ot_try(stmt text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
  EXECUTE stmt;
  RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
  RETURN SQLSTATE;
END $$;
SET ROLE h2ot_del;
CREATE TABLE h2ot.t (id int PRIMARY KEY, amount int);
CREATE TABLE h2ot.u (id int PRIMARY KEY, amount int);
-- its own table, another target's explicit topic: refused
SELECT h2ot_try($$SELECT cdc.register_mapping('h2ot.t', outbox => true, outbox_topic => 'h2ot.payments.v1')$$);
-- another target's default topic (its qualified name): refused
SELECT h2ot_try($$SELECT cdc.register_mapping('h2ot.u', outbox => true, outbox_topic => 'public.h2ot_payments')$$);
-- the same through a direct UPDATE of its mapping row
SELECT outbox_topic FROM cdc.register_mapping('h2ot.t', outbox => true);
SELECT h2ot_try($$UPDATE cdc.mapping SET outbox_topic = 'h2ot.payments.v1' WHERE target = 'h2ot.t'::regclass$$);
-- what it would write: a row of the payments topic, with the payments
-- table's source identity and idempotency key
SELECT cdc_apply('{"source": {"connector": "postgresql", "name": "srv", "db": "src", "schema": "public",
                              "table": "h2ot_payments", "lsn": 4096, "txId": 500, "snapshot": "false"},
                   "op": "c", "after": {"id": 1, "amount": 1000000}}'::jsonb, 'h2ot.t');
-- its own topics stay its business
SELECT outbox_topic FROM cdc.register_mapping('h2ot.u', outbox => true, outbox_topic => 'h2ot.mine');
-- the error names the field
SELECT cdc.register_mapping('h2ot.u', outbox => true, outbox_topic => 'h2ot.payments.v1');
-- a table named so that its default topic (schema.table) is another owner's topic
CREATE TABLE h2ot."payments.v1" (id int PRIMARY KEY, amount int);
SELECT h2ot_try($$SELECT cdc.register_mapping('h2ot."payments.v1"', outbox => true)$$);
-- a delegate's topic is recorded (not NULL): a rename of its table cannot
-- move its rows into another topic afterwards
SELECT h2ot_try($$UPDATE cdc.mapping SET outbox_topic = NULL WHERE target = 'h2ot.t'::regclass$$);
ALTER TABLE h2ot.t RENAME TO t2;
SELECT outbox_topic FROM cdc.mapping WHERE target = 'h2ot.t2'::regclass;
ALTER TABLE h2ot.t2 RENAME TO t;
-- without an outbox, the topic is not checked (no rows are written)
SELECT h2ot_try($$UPDATE cdc.mapping SET outbox = false, outbox_topic = NULL WHERE target = 'h2ot.t'::regclass$$);
RESET ROLE;
SELECT topic, target, payload FROM cdc.outbox WHERE topic IN ('h2ot.payments.v1', 'public.h2ot_payments') ORDER BY id;
DELETE FROM cdc.outbox_rows WHERE target IN ('h2ot.t'::regclass, 'h2ot.u'::regclass);
DROP TABLE h2ot.t, h2ot.u, h2ot."payments.v1", h2ot_payments;
DROP FUNCTION h2ot_try(text);
DROP SCHEMA h2ot;
REVOKE ALL ON cdc.mapping FROM h2ot_del;
REVOKE ALL ON FUNCTION cdc.register_mapping(regclass, text, text, name[], name, boolean, text, text, text, text,
                                            bigint, text, text, text, regprocedure, text, text) FROM h2ot_del;
DROP ROLE h2ot_del;
