-- The history the console charts beside queue_minutes' throughput: each
-- consumer group's lag, and each stream query's cycles, per minute.
--
-- A group's lag is a gauge: the backlog refresh of any replica writes the
-- minute's sample, and a later sample of the same minute replaces it.
CREATE TABLE queen.group_minutes (
    tenant         text NOT NULL,
    queue          text NOT NULL,
    consumer_group text NOT NULL,
    minute         timestamptz NOT NULL,
    lag            bigint NOT NULL,           -- offsets pushed and not yet consumed
    lag_seconds    double precision NOT NULL, -- age of the oldest unconsumed message
    PRIMARY KEY (tenant, queue, minute, consumer_group)
);
CREATE INDEX group_minutes_minute_brin ON queen.group_minutes USING brin (minute);

-- Cycles are counts: each replica adds its own, as for queue_minutes. They
-- are kept by query id, which a cycle names; a query deleted and registered
-- again under its name starts a new history.
CREATE TABLE queen_streams.query_minutes (
    tenant   text NOT NULL,
    query_id uuid NOT NULL,
    minute  timestamptz NOT NULL,
    replica text NOT NULL,
    cycles  bigint NOT NULL DEFAULT 0, -- committed
    refused bigint NOT NULL DEFAULT 0, -- refused by the rules (a stale lease, a fenced generation, ...)
    PRIMARY KEY (tenant, query_id, minute, replica)
);
CREATE INDEX query_minutes_minute_brin ON queen_streams.query_minutes USING brin (minute);
