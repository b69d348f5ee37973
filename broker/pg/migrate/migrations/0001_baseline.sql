-- The baseline: Regent's tables, indexes and types as of its first release.
-- The pre-release history (migrations 0001_schemas to 0012_queue_ack_v2) was
-- squashed into this file before anything was released; migrate refuses a
-- database that still carries it. Functions are not here: each lives in a
-- file of its own under functions/ and is applied on every migrate.
--
-- `queen` holds the queue and its log, `queen_streams` the streaming
-- queries; the schema names are part of the contract.
CREATE SCHEMA queen;
CREATE SCHEMA queen_streams;

-- The partitioned queue: queues, partitions with their offset allocator, the
-- log of packed segments, the per-group cursors that carry leases, push
-- dedup, subscriptions and dead letters.

CREATE TABLE queen.queues (
    id                          uuid PRIMARY KEY,
    tenant                      text NOT NULL DEFAULT 'default',
    name                        text NOT NULL,
    namespace                   text,
    task                        text,
    lease_time                  integer NOT NULL DEFAULT 300,
    retry_limit                 integer NOT NULL DEFAULT 3,
    retry_delay                 integer NOT NULL DEFAULT 1000,
    max_size                    integer NOT NULL DEFAULT 0,
    ttl                         integer NOT NULL DEFAULT 3600,
    priority                    integer NOT NULL DEFAULT 0,
    delayed_processing          integer NOT NULL DEFAULT 0,
    window_buffer               integer NOT NULL DEFAULT 0,
    retention_seconds           integer NOT NULL DEFAULT 0,
    completed_retention_seconds integer NOT NULL DEFAULT 0,
    retention_enabled           boolean NOT NULL DEFAULT false,
    encryption_enabled          boolean NOT NULL DEFAULT false,
    dead_letter_queue           boolean NOT NULL DEFAULT false,
    dlq_after_max_retries       boolean NOT NULL DEFAULT false,
    max_wait_time_seconds       integer NOT NULL DEFAULT 0,
    created_at                  timestamptz NOT NULL DEFAULT now(),
    updated_at                  timestamptz NOT NULL DEFAULT now(),
    UNIQUE (tenant, name)
);

CREATE TABLE queen.partitions (
    id           uuid PRIMARY KEY,
    queue_id     uuid NOT NULL REFERENCES queen.queues (id) ON DELETE CASCADE,
    name         text NOT NULL,
    -- The allocator: the offset the next pushed frame gets. Only
    -- queen.log_push_one_v1 moves it, under this row's lock.
    next_offset  bigint NOT NULL DEFAULT 0,
    created_at   timestamptz NOT NULL DEFAULT now(),
    last_push_at timestamptz,
    UNIQUE (queue_id, name)
);

-- One row per push request per partition. A segment covers the offsets
-- [base_offset, base_offset + frame_count). Retention deletes whole rows, so
-- offsets can have gaps and every walk over them must skip the gaps.
CREATE TABLE queen.log_segments (
    partition_id   uuid NOT NULL REFERENCES queen.partitions (id) ON DELETE CASCADE,
    base_offset    bigint NOT NULL,
    frame_count    integer NOT NULL CHECK (frame_count > 0),
    -- zstd-compressed frames (see broker/segment) and the xxhash64 of the
    -- uncompressed frames, checked on every read.
    body           bytea NOT NULL,
    checksum       bigint NOT NULL,
    -- The transaction id of each frame, in frame order, kept outside the
    -- compressed body so that an ack can find its offset inside the database.
    txids          text[] NOT NULL,
    min_created_at timestamptz NOT NULL,
    max_created_at timestamptz NOT NULL,
    PRIMARY KEY (partition_id, base_offset)
);
-- The body is already compressed: keep PostgreSQL from trying again. And keep
-- segments of up to a page inline: with the default target (2 kB) almost every
-- segment went to TOAST, which cost a second heap row and index entry per push
-- and a second lookup per pop (push throughput doubled without it).
ALTER TABLE queen.log_segments ALTER COLUMN body SET STORAGE EXTERNAL;
ALTER TABLE queen.log_segments SET (toast_tuple_target = 8160);
-- Segments are appended in time order, so a BRIN index serves the retention
-- sweep for almost nothing.
CREATE INDEX log_segments_time_brin ON queen.log_segments USING brin (max_created_at);

-- One row per (partition, consumer group).
CREATE TABLE queen.cursors (
    partition_id     uuid NOT NULL REFERENCES queen.partitions (id) ON DELETE CASCADE,
    consumer_group   text NOT NULL,
    -- The next offset to deliver. Never moves backwards.
    committed        bigint NOT NULL DEFAULT 0,
    -- The last delivered batch, [batch_start, batch_end). It stays after the
    -- batch is done so that a repeated ack of it is recognised. A batch is
    -- outstanding while committed < batch_end; lease_id is NULL when a
    -- failure or a retry released it (or it was auto-acked).
    batch_start      bigint,
    batch_end        bigint,
    lease_id         uuid,
    -- The lease's expiry; without a lease, the end of a failed batch's
    -- retryDelay. No pop claims the partition before it.
    lease_expires_at timestamptz,
    retry_count      integer NOT NULL DEFAULT 0,
    total_consumed   bigint NOT NULL DEFAULT 0,
    last_consumed_at timestamptz,
    PRIMARY KEY (partition_id, consumer_group)
);
CREATE INDEX cursors_lease_idx ON queen.cursors (lease_id) WHERE lease_id IS NOT NULL;

-- Where a named consumer group starts on a queue, decided on its first pop
-- and remembered for every partition of the queue.
CREATE TABLE queen.subscriptions (
    queue_id       uuid NOT NULL REFERENCES queen.queues (id) ON DELETE CASCADE,
    consumer_group text NOT NULL,
    -- Frames created strictly after this instant are delivered;
    -- '-infinity' means from the beginning.
    starts_after   timestamptz NOT NULL,
    created_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (queue_id, consumer_group)
);

-- Client-supplied transaction ids seen per partition, for push dedup. Rows
-- older than the broker's dedup window are swept. No foreign key: a check per
-- pushed message would cost more than the sweep that removes orphans.
CREATE TABLE queen.push_dedup (
    partition_id   uuid NOT NULL,
    transaction_id text NOT NULL,
    message_id     uuid NOT NULL,
    created_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (partition_id, transaction_id)
);
CREATE INDEX push_dedup_created_brin ON queen.push_dedup USING brin (created_at);

CREATE TABLE queen.dead_letters (
    message_id     uuid NOT NULL,
    partition_id   uuid NOT NULL REFERENCES queen.partitions (id) ON DELETE CASCADE,
    consumer_group text NOT NULL,
    transaction_id text NOT NULL,
    payload        bytea,
    -- The key that sealed payload, or NULL for plaintext.
    key_id         bigint,
    error_message  text,
    retry_count    integer NOT NULL DEFAULT 0,
    created_at     timestamptz NOT NULL,
    failed_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (partition_id, consumer_group, message_id)
);
CREATE INDEX dead_letters_failed_idx ON queen.dead_letters (failed_at);

-- Streaming queries, their state shards, and the tenant quota grants.

CREATE TABLE queen_streams.queries (
    id           uuid PRIMARY KEY,
    tenant       text NOT NULL DEFAULT 'default',
    name         text NOT NULL,
    source_queue text NOT NULL,
    sink_queue   text,
    config_hash  text NOT NULL,
    -- Grows by one with every registration that resets the query's state,
    -- in the same transaction: the operator reads it to know whether a
    -- reset it sent has committed.
    reset_generation bigint NOT NULL DEFAULT 0,
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now(),
    UNIQUE (tenant, name)
);

-- One shard per (query, source partition). Keys are opaque strings compared
-- bytewise ("C"), so ORDER BY key is stable across locales and a key_prefix
-- read is a range scan of the primary key.
CREATE TABLE queen_streams.state (
    query_id     uuid NOT NULL REFERENCES queen_streams.queries (id) ON DELETE CASCADE,
    partition_id uuid NOT NULL,
    key          text COLLATE "C" NOT NULL,
    value        jsonb NOT NULL,
    updated_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (query_id, partition_id, key)
);

-- Grants for non-default tenants to register new query names. max_queries
-- NULL means no cap.
CREATE TABLE queen_streams.quota (
    tenant      text PRIMARY KEY,
    enabled     boolean NOT NULL DEFAULT true,
    max_queries integer CHECK (max_queries >= 0),
    updated_at  timestamptz NOT NULL DEFAULT now()
);
