-- The analytics routes' data (queue-admin-api.md §5, §6).
--
-- Per-minute operation counters, one row per (tenant, minute, queue,
-- replica). Each replica counts in memory and adds its counts to its own rows
-- every few seconds (INSERT ... ON CONFLICT DO UPDATE SET n = n + EXCLUDED.n),
-- so no push, pop or ack waits for this table, and a replica that flushes
-- the same minute twice adds up. The routes sum over replicas. Queues are
-- named, not referenced: the series of a deleted queue stays until it ages
-- out.
CREATE TABLE queen.queue_minutes (
    tenant        text NOT NULL,
    minute        timestamptz NOT NULL,
    queue         text NOT NULL,
    replica       text NOT NULL,
    push_requests bigint NOT NULL DEFAULT 0,
    push_messages bigint NOT NULL DEFAULT 0,
    pop_requests  bigint NOT NULL DEFAULT 0, -- pops that delivered
    pop_messages  bigint NOT NULL DEFAULT 0,
    pop_empty     bigint NOT NULL DEFAULT 0, -- pops answered 204
    ack_requests  bigint NOT NULL DEFAULT 0,
    ack_success   bigint NOT NULL DEFAULT 0,
    ack_failed    bigint NOT NULL DEFAULT 0,
    dead_lettered bigint NOT NULL DEFAULT 0,
    transactions  bigint NOT NULL DEFAULT 0,
    -- Pop lag, in ms from a message's creation to its delivery.
    lag_sum_ms    bigint NOT NULL DEFAULT 0,
    lag_count     bigint NOT NULL DEFAULT 0,
    lag_max_ms    bigint NOT NULL DEFAULT 0,
    -- The long-polls parked on the queue, sampled once a second and summed:
    -- the minute's average is parked_sum / 60.
    parked_sum    bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant, minute, queue, replica)
);
-- Rows are written in time order: the retention sweep finds old minutes by
-- block range.
CREATE INDEX queue_minutes_minute_brin ON queen.queue_minutes USING brin (minute);

-- One sample a minute of each replica's process and pool (system-metrics);
-- a replica's latest sample is also how the routes know it is alive.
CREATE TABLE queen.replica_samples (
    replica       text NOT NULL,
    minute        timestamptz NOT NULL,
    sampled_at    timestamptz NOT NULL,
    cpu_user_pct  double precision NOT NULL, -- since the previous sample
    cpu_sys_pct   double precision NOT NULL,
    rss_bytes     bigint NOT NULL,
    virtual_bytes bigint NOT NULL,
    pool_size     integer NOT NULL,
    pool_idle     integer NOT NULL,
    pool_active   integer NOT NULL,
    PRIMARY KEY (minute, replica)
);

-- What each retention sweep removed, one row per partition, kind and
-- sweep (retention): 'retention' (retentionSeconds), 'completed_retention'
-- (retentionEnabled) or 'eviction' (maxWaitTimeSeconds).
CREATE TABLE queen.retention_events (
    tenant       text NOT NULL,
    at           timestamptz NOT NULL DEFAULT now(),
    queue        text NOT NULL,
    partition_id uuid NOT NULL,
    kind         text NOT NULL CHECK (kind IN ('retention', 'completed_retention', 'eviction')),
    messages     bigint NOT NULL
);
CREATE INDEX retention_events_tenant_at_idx ON queen.retention_events (tenant, at);

-- Traces (§6): annotations a consumer attaches to a message. They belong to
-- the message's partition, and go with it: with the queue (the foreign key),
-- and with the segment that held the message (the sweep compares offsets).
CREATE TABLE queen.traces (
    id             uuid PRIMARY KEY, -- UUIDv7: sorts by creation
    partition_id   uuid NOT NULL REFERENCES queen.partitions (id) ON DELETE CASCADE,
    transaction_id text NOT NULL,
    message_offset bigint NOT NULL,
    consumer_group text NOT NULL,
    event_type     text NOT NULL,
    data           jsonb NOT NULL,
    worker_id      text NOT NULL,
    created_at     timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX traces_message_idx ON queen.traces (partition_id, transaction_id, id);

-- A trace's names, with the tenant copied so that the by-name and names
-- reads are range scans of one tenant's rows.
CREATE TABLE queen.trace_names (
    tenant     text NOT NULL,
    name       text NOT NULL,
    trace_id   uuid NOT NULL REFERENCES queen.traces (id) ON DELETE CASCADE,
    PRIMARY KEY (tenant, name, trace_id)
);
CREATE INDEX trace_names_trace_idx ON queen.trace_names (trace_id);
