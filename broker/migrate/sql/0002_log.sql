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

-- Resolves (tenant, queue, partition) to ids and the queue options the broker
-- needs in memory. With p_create, a missing queue (default options) or
-- partition is created with the ids the broker made (UUIDv7); concurrent
-- creators converge on one row. Returns no row when p_create is false and
-- either is missing.
CREATE FUNCTION queen.resolve_partition_v1(
    p_tenant           text,
    p_queue            text,
    p_partition        text,
    p_create           boolean,
    p_new_queue_id     uuid,
    p_new_partition_id uuid,
    OUT queue_id           uuid,
    OUT partition_id       uuid,
    OUT lease_time         integer,
    OUT retry_limit        integer,
    OUT delayed_processing integer,
    OUT encryption_enabled boolean
) RETURNS SETOF record LANGUAGE plpgsql AS $$
BEGIN
    SELECT q.id, q.lease_time, q.retry_limit, q.delayed_processing, q.encryption_enabled
      INTO queue_id, lease_time, retry_limit, delayed_processing, encryption_enabled
      FROM queen.queues q WHERE q.tenant = p_tenant AND q.name = p_queue;
    IF NOT FOUND THEN
        IF NOT p_create THEN
            RETURN;
        END IF;
        -- ON CONFLICT waits for a concurrent creator; the next statement
        -- then sees its row.
        INSERT INTO queen.queues (id, tenant, name) VALUES (p_new_queue_id, p_tenant, p_queue)
        ON CONFLICT (tenant, name) DO NOTHING;
        SELECT q.id, q.lease_time, q.retry_limit, q.delayed_processing, q.encryption_enabled
          INTO queue_id, lease_time, retry_limit, delayed_processing, encryption_enabled
          FROM queen.queues q WHERE q.tenant = p_tenant AND q.name = p_queue;
    END IF;
    SELECT p.id INTO partition_id FROM queen.partitions p
     WHERE p.queue_id = resolve_partition_v1.queue_id AND p.name = p_partition;
    IF NOT FOUND THEN
        IF NOT p_create THEN
            RETURN;
        END IF;
        INSERT INTO queen.partitions (id, queue_id, name)
        VALUES (p_new_partition_id, resolve_partition_v1.queue_id, p_partition)
        ON CONFLICT ON CONSTRAINT partitions_queue_id_name_key DO NOTHING;
        SELECT p.id INTO partition_id FROM queen.partitions p
         WHERE p.queue_id = resolve_partition_v1.queue_id AND p.name = p_partition;
    END IF;
    RETURN NEXT;
END
$$;

-- The allocator, and the only way data enters the log: /api/v1/push and the
-- streams cycle both call it. It takes one segment, already packed by the
-- broker, for one partition, assigns its base offset under the partition
-- row's lock, and stores it.
--
-- p_dedup_txids are the client-supplied transaction ids among the frames (ids
-- the broker made are unique by construction and are not recorded). When any
-- of them is already recorded for the partition nothing is written: the
-- function returns a NULL base offset with the duplicates and their message
-- ids, and the broker repacks the segment without them.
CREATE FUNCTION queen.log_push_one_v1(
    p_partition_id   uuid,
    p_frame_count    integer,
    p_body           bytea,
    p_checksum       bigint,
    p_txids          text[],
    p_min_created_at timestamptz,
    p_max_created_at timestamptz,
    p_dedup_txids    text[],
    p_dedup_msg_ids  uuid[],
    OUT base_offset     bigint,
    OUT dup_txids       text[],
    OUT dup_message_ids uuid[]
) LANGUAGE plpgsql AS $$
DECLARE
    v_queue_id uuid;
BEGIN
    IF cardinality(p_dedup_txids) > 0 THEN
        SELECT queue_id INTO v_queue_id FROM queen.partitions WHERE id = p_partition_id FOR UPDATE;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'partition not found' USING ERRCODE = 'P0002';
        END IF;
        SELECT array_agg(d.transaction_id), array_agg(d.message_id)
          INTO dup_txids, dup_message_ids
          FROM queen.push_dedup d
         WHERE d.partition_id = p_partition_id
           AND d.transaction_id = ANY (p_dedup_txids);
        IF dup_txids IS NOT NULL THEN
            RETURN;
        END IF;
    END IF;

    UPDATE queen.partitions
       SET next_offset = next_offset + p_frame_count,
           last_push_at = p_max_created_at
     WHERE id = p_partition_id
    RETURNING next_offset - p_frame_count, queue_id INTO base_offset, v_queue_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'partition not found' USING ERRCODE = 'P0002';
    END IF;

    INSERT INTO queen.log_segments
        (partition_id, base_offset, frame_count, body, checksum, txids, min_created_at, max_created_at)
    VALUES
        (p_partition_id, base_offset, p_frame_count, p_body, p_checksum, p_txids, p_min_created_at, p_max_created_at);

    IF cardinality(p_dedup_txids) > 0 THEN
        INSERT INTO queen.push_dedup (partition_id, transaction_id, message_id)
        SELECT p_partition_id, t, m FROM unnest(p_dedup_txids, p_dedup_msg_ids) AS u (t, m);
    END IF;

    -- Every replica LISTENs on this channel to keep its hot list and wake
    -- parked pops; NOTIFY is delivered only if the transaction commits.
    PERFORM pg_notify('regent_log', v_queue_id::text || ':' || p_partition_id::text);
END
$$;
