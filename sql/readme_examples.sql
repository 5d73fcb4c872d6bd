--
-- readme_examples (fresh-user review h4): README.md's SQL examples, read
-- from README.md itself and run as written in a new database, as a user
-- copying them does.  Found failing: the handler example registered
-- order_totals(text, orders, orders, jsonb), defined only in
-- docs/handlers.md, on a table orders the README never created (42P01);
-- the history example read a table payments it never created; the batch
-- examples used $1 and $2, which psql has no values for (42P02).
-- Every ```sql block runs here except the two that need a source server
-- (they name the subscription 'shop': create_subscription, audit, resync).
-- Afterwards one order and one payment go through the handler and history
-- mappings the README registered.
--
\getenv abs_srcdir PG_ABS_SRCDIR
SELECT current_database() AS regress_db \gset
SELECT count(*) AS blocks, count(*) FILTER (WHERE m[1] ~ 'shop''') AS need_a_source
  FROM regexp_matches(pg_read_file(:'abs_srcdir' || '/README.md'), E'```sql\n(.*?)```', 'g') AS b(m);
SELECT string_agg(m[1], E'\n' ORDER BY n) AS readme_sql
  FROM regexp_matches(pg_read_file(:'abs_srcdir' || '/README.md'), E'```sql\n(.*?)```', 'g') WITH ORDINALITY AS b(m, n)
 WHERE m[1] !~ 'shop''' \gset
CREATE DATABASE readme_examples;
\c readme_examples
\set ECHO queries
:readme_sql
\set ECHO all
-- the handler keeps the customer's total; the history table gets the change
SELECT cdc_apply('{"op": "c", "after": {"id": 7, "customer_id": 1, "amount": 12.50},
                   "source": {"name": "srv", "db": "shop", "schema": "public", "table": "orders", "lsn": 24024000, "txId": 600}}');
SELECT * FROM customer_totals;
SELECT cdc_apply('{"op": "c", "after": {"id": 70, "order_id": 7, "amount": 12.50},
                   "source": {"name": "srv", "db": "shop", "schema": "public", "table": "payments", "lsn": 24024100, "txId": 601}}');
SELECT id, order_id, amount, cdc_op FROM payments_history;
SELECT * FROM customers ORDER BY id;
\c :regress_db
DROP DATABASE readme_examples;
