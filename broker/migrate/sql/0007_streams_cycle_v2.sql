-- The streams cycle as a function: the announcements leave the database,
-- and the common cycle runs fewer statements.
--
-- queen_streams.cycle_v1 NOTIFYs the sink partitions and the released source
-- itself, after a COMMIT of its own (it is a procedure for that): a second
-- transaction per cycle, and a listener woken per cycle. The broker now
-- announces after the commit, coalescing what many requests announce
-- (broker/hotlist's Announcer), and the cycle is a plain function: one
-- implicit transaction, committed durably before the answer.
--
-- cycle_v2 takes the arguments of cycle_v1 and gives the same answer
-- (announce still says the released source holds data to deliver), under
-- the same rules; 0006_streams_cycle.sql describes them. What differs is
-- how: the advisory lock is taken by the statement that checks ownership
-- (which reads the queue by its primary key whatever the plan),
-- and the common ack (a success status, the lease released, a count) checks
-- the lease in the UPDATE that applies it instead of locking the cursor row
-- first, which saves two statements of about nine.
--
-- cycle_v1 stays for brokers of the previous version during a rolling
-- upgrade; a later migration drops it.

-- Raises the refusal of an ack whose lease is not the live lease of the
-- group's cursor on the partition: none is held, another worker's is, or it
-- expired.
CREATE FUNCTION queen_streams.refuse_lease_v1(p_partition_id uuid, p_group text, p_lease_id uuid)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    v_cursor queen.cursors%ROWTYPE;
BEGIN
    SELECT * INTO v_cursor FROM queen.cursors c
     WHERE c.partition_id = p_partition_id AND c.consumer_group = p_group;
    IF NOT FOUND OR v_cursor.lease_id IS NULL THEN
        RAISE EXCEPTION 'invalid lease: no lease is held on this partition for consumer group %', p_group;
    END IF;
    IF v_cursor.lease_id <> p_lease_id THEN
        RAISE EXCEPTION 'invalid lease: the partition is leased to another worker';
    END IF;
    RAISE EXCEPTION 'invalid lease: the lease expired at %', v_cursor.lease_expires_at;
END
$$;

CREATE FUNCTION queen_streams.cycle_v2(
    p_tenant         text,
    p_query_id       uuid,
    p_partition_id   uuid,
    p_group          text,
    p_ops            jsonb,
    p_seg_partitions uuid[],
    p_seg_frames     integer[],
    p_seg_bodies     bytea[],
    p_seg_checksums  bigint[],
    p_seg_txids      text[],
    p_seg_min_at     timestamptz[],
    p_seg_max_at     timestamptz[],
    p_seg_dedups     integer[],
    p_dedup_txids    text[],
    p_dedup_msg_ids  uuid[],
    p_ack            boolean,
    p_lease_id       uuid,
    p_ack_ok         boolean,
    p_count          bigint,
    p_release        boolean,
    OUT queue_id       uuid,
    OUT queue_name     text,
    OUT ops_applied    integer,
    OUT base_offsets   bigint[],
    OUT ack_count      bigint,
    OUT lease_released boolean,
    OUT announce       boolean
) LANGUAGE plpgsql AS $$
DECLARE
    v_cursor   queen.cursors%ROWTYPE;
    v_one      boolean := p_ack AND p_ack_ok AND p_release AND p_count IS NOT NULL;
    v_query_ok boolean;
    v_next     bigint;
    v_op       jsonb;
    v_type     text;
    v_key      text;
    v_value    jsonb;
    v_push     record;
    v_t        integer := 0;
    v_d        integer := 0;
    v_walk     record;
    v_dups     jsonb := '[]';
BEGIN
    -- The advisory lock serialises every cycle on this (query, partition),
    -- idle flushes included: they take no cursor lock. next_offset read here
    -- serves the announce below: a push that lands after this read
    -- announces itself.
    SELECT EXISTS (SELECT FROM queen_streams.queries q WHERE q.id = p_query_id AND q.tenant = p_tenant),
           qu.id, qu.name, pa.next_offset
      INTO v_query_ok, queue_id, queue_name, v_next
      FROM (SELECT pg_advisory_xact_lock(hashtextextended(p_query_id::text || p_partition_id::text, 0))) AS lock (x)
      LEFT JOIN queen.partitions pa ON pa.id = p_partition_id
      -- The queue by its primary key: as a plain join, the generic plan
      -- read every queue of the tenant through the tenant index.
      LEFT JOIN LATERAL (SELECT q.id, q.name FROM queen.queues q
                          WHERE q.id = pa.queue_id AND q.tenant = p_tenant OFFSET 0) AS qu ON true;
    IF NOT v_query_ok THEN
        RAISE EXCEPTION 'query not found';
    END IF;
    IF queue_id IS NULL THEN
        RAISE EXCEPTION 'partition not found';
    END IF;

    -- The exactly-once guard. The common ack (v_one) checks the lease in
    -- the UPDATE that applies it, at the end; every other ack locks the
    -- cursor row here, since its work reads the row. Either way the row is
    -- locked from the check to the commit, so no pop can take the lease in
    -- between, and a refusal rolls back everything the cycle did.
    IF p_ack AND p_lease_id IS NULL THEN
        RAISE EXCEPTION 'invalid lease: the ack carries no leaseId';
    END IF;
    IF p_ack AND NOT v_one THEN
        SELECT * INTO v_cursor FROM queen.cursors c
         WHERE c.partition_id = p_partition_id AND c.consumer_group = p_group
           FOR UPDATE;
        IF NOT FOUND OR v_cursor.lease_id IS DISTINCT FROM p_lease_id
           OR v_cursor.lease_expires_at <= clock_timestamp() THEN
            PERFORM queen_streams.refuse_lease_v1(p_partition_id, p_group, p_lease_id);
        END IF;
    END IF;

    -- The state ops, in order. For the handful a cycle carries, one cached
    -- statement per op costs less CPU than a set-based apply (measured with
    -- four upserts: a DISTINCT ON over the array, then one delete and one
    -- insert, took about 15% more). The elements are taken by index, which
    -- is an expression, not a query.
    ops_applied := 0;
    FOR i IN 0 .. jsonb_array_length(p_ops) - 1 LOOP
        v_op := p_ops->i;
        v_type := v_op->>'type';
        IF v_type IS DISTINCT FROM 'upsert' AND v_type IS DISTINCT FROM 'delete' THEN
            RAISE EXCEPTION 'state_ops[%]: unknown type %', ops_applied, coalesce(v_op->'type', 'null'::jsonb)::text;
        END IF;
        IF jsonb_typeof(v_op->'key') IS DISTINCT FROM 'string' THEN
            RAISE EXCEPTION 'state_ops[%]: key must be a string', ops_applied;
        END IF;
        v_key := v_op->>'key';
        IF v_type = 'upsert' THEN
            v_value := v_op->'value';
            IF v_value IS NULL THEN
                RAISE EXCEPTION 'state_ops[%]: upsert needs a value', ops_applied;
            END IF;
            INSERT INTO queen_streams.state AS s (query_id, partition_id, key, value, updated_at)
            VALUES (p_query_id, p_partition_id, v_key, v_value, now())
            ON CONFLICT (query_id, partition_id, key)
            DO UPDATE SET value = EXCLUDED.value, updated_at = EXCLUDED.updated_at;
        ELSE
            DELETE FROM queen_streams.state s
             WHERE s.query_id = p_query_id AND s.partition_id = p_partition_id AND s.key = v_key;
        END IF;
        ops_applied := ops_applied + 1;
    END LOOP;

    base_offsets := '{}';
    FOR i IN 1 .. coalesce(cardinality(p_seg_partitions), 0) LOOP
        v_push := queen.log_push_one_v1(
            p_seg_partitions[i], p_seg_frames[i], p_seg_bodies[i], p_seg_checksums[i],
            p_seg_txids[v_t + 1 : v_t + p_seg_frames[i]],
            p_seg_min_at[i], p_seg_max_at[i],
            coalesce(p_dedup_txids[v_d + 1 : v_d + p_seg_dedups[i]], '{}'),
            coalesce(p_dedup_msg_ids[v_d + 1 : v_d + p_seg_dedups[i]], '{}'),
            false);
        IF v_push.base_offset IS NULL THEN
            v_dups := v_dups || jsonb_build_object('partition_id', p_seg_partitions[i],
                'txids', v_push.dup_txids, 'message_ids', v_push.dup_message_ids);
        END IF;
        base_offsets := base_offsets || v_push.base_offset;
        v_t := v_t + p_seg_frames[i];
        v_d := v_d + p_seg_dedups[i];
    END LOOP;
    IF jsonb_array_length(v_dups) > 0 THEN
        RAISE EXCEPTION 'duplicate transaction ids in sink segments' USING ERRCODE = 'RGD01', DETAIL = v_dups::text;
    END IF;

    lease_released := false;
    announce := false;
    IF NOT p_ack THEN
        -- no lease work
    ELSIF v_one THEN
        UPDATE queen.cursors c
           SET committed = greatest(c.committed, c.batch_end),
               lease_id = NULL, lease_expires_at = NULL, retry_count = 0,
               total_consumed = c.total_consumed + p_count, last_consumed_at = now()
         WHERE c.partition_id = p_partition_id AND c.consumer_group = p_group
           AND c.lease_id = p_lease_id AND c.lease_expires_at > clock_timestamp()
        RETURNING c.committed INTO v_cursor.committed;
        IF NOT FOUND THEN
            PERFORM queen_streams.refuse_lease_v1(p_partition_id, p_group, p_lease_id);
        END IF;
        ack_count := p_count;
        lease_released := true;
    ELSIF NOT p_ack_ok THEN
        -- A nack: the whole batch redelivers.
        UPDATE queen.cursors c
           SET lease_id = NULL, lease_expires_at = NULL
         WHERE c.partition_id = p_partition_id AND c.consumer_group = p_group;
        ack_count := 0;
        lease_released := true;
    ELSIF p_release THEN
        -- No count: the whole leased batch.
        SELECT w.walked INTO ack_count
          FROM queen_streams.walk_frames_v1(p_partition_id, v_cursor.committed, v_cursor.batch_end,
                                            v_cursor.batch_end - v_cursor.committed) w;
        UPDATE queen.cursors c
           SET committed = greatest(c.committed, c.batch_end),
               lease_id = NULL, lease_expires_at = NULL, retry_count = 0,
               total_consumed = c.total_consumed + ack_count, last_consumed_at = now()
         WHERE c.partition_id = p_partition_id AND c.consumer_group = p_group;
        v_cursor.committed := greatest(v_cursor.committed, v_cursor.batch_end);
        lease_released := true;
    ELSE
        -- The gate partial ack: exactly p_count frames, lease kept.
        SELECT * INTO v_walk
          FROM queen_streams.walk_frames_v1(p_partition_id, v_cursor.committed, v_cursor.batch_end,
                                            coalesce(p_count, v_cursor.batch_end - v_cursor.committed));
        ack_count := v_walk.walked;
        UPDATE queen.cursors c
           SET committed = v_walk.next_offset, total_consumed = c.total_consumed + ack_count,
               last_consumed_at = now()
         WHERE c.partition_id = p_partition_id AND c.consumer_group = p_group;
    END IF;
    announce := lease_released AND v_next > v_cursor.committed;
END
$$;
