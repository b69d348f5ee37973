-- Table sinks (issue 38): a query's windows written as rows of an
-- ordinary table, by the cycle, in the cycle's transaction.
--
-- A query's table sink is its table's name (sink_table), its key columns
-- (sink_keys) and its mode (sink_mode: 'upsert', one row per key, replaced
-- when a window is emitted again; or 'append'). The table is always in
-- the query's tenant's schema (queen_streams.tenant_schema), which no
-- column stores: the name is resolved there and nowhere else, so that a
-- query can neither write nor name a table of another tenant.
ALTER TABLE queen_streams.queries
    ADD COLUMN sink_table text,
    ADD COLUMN sink_keys  text[],
    ADD COLUMN sink_mode  text CHECK (sink_mode IN ('upsert', 'append')),
    ADD CONSTRAINT queries_sink_complete CHECK ((sink_table IS NULL) = (sink_mode IS NULL));

-- What the cycles of a (query, source partition) last wrote to its table:
-- one row each, written under the cycle's (query, partition) lock, so that
-- no two cycles wait on one row. The console shows the latest write.
CREATE TABLE queen_streams.sink_writes (
    query_id     uuid NOT NULL REFERENCES queen_streams.queries (id) ON DELETE CASCADE,
    partition_id uuid NOT NULL,
    rows         bigint NOT NULL,
    written_at   timestamptz NOT NULL,
    PRIMARY KEY (query_id, partition_id)
);
