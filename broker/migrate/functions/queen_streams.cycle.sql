-- TODO header
CREATE OR REPLACE FUNCTION queen_streams.cycle(
    p_tenant         text,
    p_query_id       uuid,
    p_partition_id   uuid,
    p_group          text,
    p_op_error       text,
    p_upsert_keys    text[],
    p_upsert_values  jsonb[],
    p_delete_keys    text[],
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
            PERFORM queen_streams.refuse_lease(p_partition_id, p_group, p_lease_id);
        END IF;
    END IF;

    -- The state ops, folded by the broker: no key is in both lists, nor
    -- twice in one, so ON CONFLICT meets each row at most once.
    IF p_op_error IS NOT NULL THEN
        RAISE EXCEPTION '%', p_op_error;
    END IF;
    IF cardinality(p_delete_keys) > 0 THEN
        DELETE FROM queen_streams.state s
         WHERE s.query_id = p_query_id AND s.partition_id = p_partition_id AND s.key = ANY (p_delete_keys);
    END IF;
    IF cardinality(p_upsert_keys) > 0 THEN
        INSERT INTO queen_streams.state AS s (query_id, partition_id, key, value, updated_at)
        SELECT p_query_id, p_partition_id, u.key, u.value, now()
          FROM unnest(p_upsert_keys, p_upsert_values) AS u (key, value)
        ON CONFLICT (query_id, partition_id, key)
        DO UPDATE SET value = EXCLUDED.value, updated_at = EXCLUDED.updated_at;
    END IF;

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
            PERFORM queen_streams.refuse_lease(p_partition_id, p_group, p_lease_id);
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
          FROM queen_streams.walk_frames(p_partition_id, v_cursor.committed, v_cursor.batch_end,
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
          FROM queen_streams.walk_frames(p_partition_id, v_cursor.committed, v_cursor.batch_end,
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
