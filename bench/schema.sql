-- The benchmark's row: the same table on the source and in every
-- destination database (bench/run.sh).
CREATE TABLE orders (
  id          bigint PRIMARY KEY,
  customer_id integer NOT NULL,
  status      text NOT NULL,
  amount      numeric(12,2) NOT NULL,
  note        text,
  updated_at  timestamptz NOT NULL
);
