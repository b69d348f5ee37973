-- The streams cycle: state ops, sink pushes and the source ack of
-- POST /streams/v1/cycle in one transaction and one round trip.

-- Walks up to p_count frames forward from offset p_from over the real
-- segments of a partition, never past p_limit, skipping the gaps retention
-- leaves. Returns the offset just past the last frame walked and how many
-- frames that was (fewer than p_count when the range runs out).
CREATE FUNCTION queen_streams.walk_frames_v1(
    p_partition_id uuid,
    p_from         bigint,
    p_limit        bigint,
    p_count        bigint,
    OUT next_offset bigint,
    OUT walked      bigint
) LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_seg  record;
    v_take bigint;
BEGIN
    next_offset := p_from;
    walked := 0;
    IF p_count <= 0 THEN
        RETURN;
    END IF;
    -- Start at the segment holding p_from (or the first one after it), so
    -- the walk is a range scan of the primary key, not a scan from offset 0.
    FOR v_seg IN
        SELECT s.base_offset, s.frame_count
          FROM queen.log_segments s
         WHERE s.partition_id = p_partition_id
           AND s.base_offset >= coalesce((SELECT max(b.base_offset) FROM queen.log_segments b
                                          WHERE b.partition_id = p_partition_id AND b.base_offset <= p_from), p_from)
           AND s.base_offset < p_limit
         ORDER BY s.base_offset
    LOOP
        CONTINUE WHEN v_seg.base_offset + v_seg.frame_count <= next_offset;
        next_offset := greatest(next_offset, v_seg.base_offset);
        v_take := least(p_count - walked, v_seg.base_offset + v_seg.frame_count - next_offset, p_limit - next_offset);
        next_offset := next_offset + v_take;
        walked := walked + v_take;
        EXIT WHEN walked >= p_count OR next_offset >= p_limit;
    END LOOP;
END
$$;

-- One cycle. The sink segments arrive packed, as parallel arrays with one
-- element per segment; the per-frame transaction ids and the dedup ids are
-- flattened, segment after segment (p_seg_frames and p_seg_dedups say how
-- many belong to each). Segments must come sorted by partition id: that is
-- the lock order that keeps two cycles feeding the same sinks from
-- deadlocking.
--
-- Every failure raises, so the state ops, the pushes and the ack roll back
-- together. The ownership verdicts ('query not found', 'partition not
-- found' for the source) are plain raises (P0001); P0002 comes only from
-- queen.log_push_one_v1, for a sink partition deleted behind the broker's
-- cache. Sink segments holding already-recorded client transaction ids
-- raise SQLSTATE RGD01 once all segments are tried, with the duplicates in
-- DETAIL as a JSON array of {"partition_id", "txids", "message_ids"}; the
-- broker repacks without them and calls again.
--
-- p_ack false is an idle-flush cycle (ack: null): no lease work at all.
-- p_count NULL means the whole leased batch. A released lease that leaves
-- data to deliver is announced on regent_log, as the queue's ack does, so
-- that every replica's hot list offers the partition again at once;
-- announce tells the calling replica to mark its own without waiting.
CREATE FUNCTION queen_streams.cycle_v1(
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
    v_query_ok boolean;
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
    -- Serialises every cycle on this (query, partition), idle flushes
    -- included: they take no cursor lock.
    PERFORM pg_advisory_xact_lock(hashtextextended(p_query_id::text || p_partition_id::text, 0));

    SELECT EXISTS (SELECT FROM queen_streams.queries q WHERE q.id = p_query_id AND q.tenant = p_tenant),
           qu.id, qu.name
      INTO v_query_ok, queue_id, queue_name
      FROM (VALUES (1)) AS one (x)
      LEFT JOIN (queen.partitions pa JOIN queen.queues qu ON qu.id = pa.queue_id AND qu.tenant = p_tenant)
        ON pa.id = p_partition_id;
    IF NOT v_query_ok THEN
        RAISE EXCEPTION 'query not found';
    END IF;
    IF queue_id IS NULL THEN
        RAISE EXCEPTION 'partition not found';
    END IF;

    -- The exactly-once guard, checked before any work: the cursor row stays
    -- locked until commit, so no pop can take the lease in between.
    IF p_ack THEN
        IF p_lease_id IS NULL THEN
            RAISE EXCEPTION 'invalid lease: the ack carries no leaseId';
        END IF;
        SELECT * INTO v_cursor FROM queen.cursors c
         WHERE c.partition_id = p_partition_id AND c.consumer_group = p_group
           FOR UPDATE;
        IF NOT FOUND OR v_cursor.lease_id IS NULL THEN
            RAISE EXCEPTION 'invalid lease: no lease is held on this partition for consumer group %', p_group;
        END IF;
        IF v_cursor.lease_id <> p_lease_id THEN
            RAISE EXCEPTION 'invalid lease: the partition is leased to another worker';
        END IF;
        IF v_cursor.lease_expires_at <= clock_timestamp() THEN
            RAISE EXCEPTION 'invalid lease: the lease expired at %', v_cursor.lease_expires_at;
        END IF;
    END IF;

    -- The state ops, in order. For the handful a cycle carries, one cached
    -- statement per op costs less CPU than a set-based apply (measured with
    -- four upserts: a DISTINCT ON over the array, then one delete and one
    -- insert, took about 15% more).
    ops_applied := 0;
    FOR v_op IN SELECT e FROM jsonb_array_elements(p_ops) AS e LOOP
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
        SELECT * INTO v_push FROM queen.log_push_one_v1(
            p_seg_partitions[i], p_seg_frames[i], p_seg_bodies[i], p_seg_checksums[i],
            p_seg_txids[v_t + 1 : v_t + p_seg_frames[i]],
            p_seg_min_at[i], p_seg_max_at[i],
            coalesce(p_dedup_txids[v_d + 1 : v_d + p_seg_dedups[i]], '{}'),
            coalesce(p_dedup_msg_ids[v_d + 1 : v_d + p_seg_dedups[i]], '{}'));
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
        RETURN;
    END IF;
    IF NOT p_ack_ok THEN
        -- A nack: the whole batch redelivers.
        UPDATE queen.cursors c
           SET lease_id = NULL, lease_expires_at = NULL
         WHERE c.partition_id = p_partition_id AND c.consumer_group = p_group
        RETURNING c.committed INTO v_cursor.committed;
        ack_count := 0;
    ELSIF p_release THEN
        IF p_count IS NULL THEN
            SELECT w.walked INTO ack_count
              FROM queen_streams.walk_frames_v1(p_partition_id, v_cursor.committed, v_cursor.batch_end,
                                                v_cursor.batch_end - v_cursor.committed) w;
        ELSE
            ack_count := p_count;
        END IF;
        UPDATE queen.cursors c
           SET committed = greatest(c.committed, c.batch_end),
               lease_id = NULL, lease_expires_at = NULL, retry_count = 0,
               total_consumed = c.total_consumed + ack_count, last_consumed_at = now()
         WHERE c.partition_id = p_partition_id AND c.consumer_group = p_group
        RETURNING c.committed INTO v_cursor.committed;
    END IF;
    IF NOT p_ack_ok OR p_release THEN
        lease_released := true;
        SELECT pa.next_offset > v_cursor.committed INTO announce FROM queen.partitions pa WHERE pa.id = p_partition_id;
        IF announce THEN
            PERFORM pg_notify('regent_log', queue_id::text || ':' || p_partition_id::text);
        END IF;
        RETURN;
    END IF;
    -- The gate partial ack: exactly p_count frames, lease kept.
    SELECT * INTO v_walk
      FROM queen_streams.walk_frames_v1(p_partition_id, v_cursor.committed, v_cursor.batch_end,
                                        coalesce(p_count, v_cursor.batch_end - v_cursor.committed));
    ack_count := v_walk.walked;
    UPDATE queen.cursors c
       SET committed = v_walk.next_offset, total_consumed = c.total_consumed + ack_count,
           last_consumed_at = now()
     WHERE c.partition_id = p_partition_id AND c.consumer_group = p_group;
END
$$;
