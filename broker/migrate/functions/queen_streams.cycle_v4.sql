-- A cycle (queen_streams.cycle_v3, and queen_streams.cycle_v2, which holds
-- the cycle's rules) whose common case takes the shortest path: a fold's
-- cycle of an owned, unsuspended query and partition, with a success ack
-- that releases the lease and names its count, and at most one sink
-- segment. That path is two statements: the (query, partition) lock, then
-- one statement that checks ownership, the reset generation (when given)
-- and the rows the worker read (when it names them), moves the sink
-- partition's next_offset, records the segment's client transaction ids,
-- acknowledges the batch under the lease guard, stores the segment and
-- writes the state.
-- Every other cycle, and one the short path cannot finish, runs cycle_v3
-- as it is.
--
-- The short path is cycle_v2's rules for that case, in the same order:
--   - The lock comes first and alone, so that the statement's snapshot
--     already sees what the cycle, reset or restore of this (query,
--     partition) that held it committed (rule 1 of cycle_v2; the reset
--     generation).
--   - Ownership, the generation and the rows read are checked before
--     anything is written: the writes all wait on them (EXISTS owner), and
--     when one fails, nothing is written and cycle_v3 gives the verdict.
--   - The sink partition is moved (queen.log_push_one_v1's allocator for a
--     one-segment request) before the cursor. A partition that is gone
--     moves nothing, so the ack and the state writes, which wait on the
--     move, do nothing either, and cycle_v3 answers 'gone' with nothing
--     written.
--   - The client transaction ids are recorded as the allocator records
--     them, but optimistically: one the partition holds already (a
--     duplicate, or a record past its dedup window that the allocator
--     forgets) is not recorded, the ack waits on every one being recorded,
--     and cycle_v3, whose allocator tells the two apart, answers.
--   - The ack is the common ack of cycle_v2, guarded by queen.ack_verdict in
--     its UPDATE; the segment and the state writes wait on it. When the
--     ack is not applied (a refused lease, a duplicate), what the statement
--     wrote is taken back (the move by queen.log_push_undo, while the
--     partition's lock is still held; the ids it recorded), and cycle_v3
--     answers as it would have, in its order.
--   - The shard's row count moves (queen_streams.state_rows_add, which may
--     refuse the tenant's maxStateRows and roll everything back) only when
--     keys came or went, as in cycle_v2.
-- The answer is cycle_v2's 'committed' row.
CREATE OR REPLACE FUNCTION queen_streams.cycle_v4(
    p_tenant         text,
    p_query_id       uuid,
    p_partition_id   uuid,
    p_group          text,
    p_upsert_keys    text[],
    p_upsert_values  jsonb[],
    p_delete_keys    text[],
    p_expect_keys    text[],
    p_expect_at      timestamptz[],
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
    p_generation     bigint
) RETURNS TABLE (
    outcome         text,
    queue_id        uuid,
    queue_name      text,
    base_offsets    bigint[],
    ack_count       bigint,
    lease_released  boolean,
    announce        boolean,
    partition_id    uuid,
    dup_txids       text[],
    dup_message_ids uuid[]
) LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_segs      integer := coalesce(cardinality(p_seg_partitions), 0);
    v_next      bigint;
    v_base      bigint;
    v_committed bigint;
    v_inserted  bigint;
    v_deleted   bigint;
    v_dedups    integer := coalesce(cardinality(p_dedup_txids), 0);
    v_recorded  text[];
BEGIN
    IF p_ack AND p_ack_ok AND p_release AND p_count IS NOT NULL AND p_lease_id IS NOT NULL AND v_segs <= 1 THEN
        PERFORM pg_advisory_xact_lock(hashtextextended(p_query_id::text || p_partition_id::text, 0));
        WITH owner AS (
            SELECT qu.id, qu.name, pa.next_offset
              FROM queen_streams.queries q
              JOIN queen.partitions pa ON pa.id = p_partition_id
              -- The queue by its primary key, as in cycle_owner.
              JOIN LATERAL (SELECT x.id, x.name FROM queen.queues x
                             WHERE x.id = pa.queue_id AND x.tenant = p_tenant OFFSET 0) AS qu ON true
             WHERE q.id = p_query_id AND q.tenant = p_tenant AND NOT q.suspended
               AND (p_generation IS NULL OR q.reset_generation = p_generation)
               -- Rule 4 of cycle_v2: the rows the worker read are as it read them.
               AND NOT EXISTS (SELECT FROM unnest(p_expect_keys, p_expect_at) AS e (key, at)
                                 LEFT JOIN queen_streams.state s
                                   ON s.query_id = p_query_id AND s.partition_id = p_partition_id AND s.key = e.key
                                WHERE s.key IS NULL OR s.updated_at IS DISTINCT FROM coalesce(e.at, s.updated_at))),
        moved AS (
            UPDATE queen.partitions p
               SET next_offset = p.next_offset + p_seg_frames[1],
                   last_push_at = p_seg_max_at[1],
                   stored_bytes = p.stored_bytes + octet_length(p_seg_bodies[1])
             WHERE p.id = p_seg_partitions[1] AND EXISTS (SELECT FROM owner)
            RETURNING p.next_offset - p_seg_frames[1] AS base),
        recorded AS (
            INSERT INTO queen.push_dedup (partition_id, transaction_id, message_id)
            SELECT p_seg_partitions[1], d.txid, d.message_id
              FROM unnest(p_dedup_txids, p_dedup_msg_ids) AS d (txid, message_id)
             WHERE EXISTS (SELECT FROM moved)
            ON CONFLICT DO NOTHING
            RETURNING transaction_id),
        acked AS (
            UPDATE queen.cursors c
               SET committed = greatest(c.committed, c.batch_end),
                   (lease_id, lease_expires_at, retry_count) = (SELECT r.lease_id, r.lease_expires_at, r.retry_count
                                                                  FROM queen.lease_release(c, true, true) r),
                   total_consumed = c.total_consumed + p_count, last_consumed_at = now()
             WHERE c.partition_id = p_partition_id AND c.consumer_group = p_group
               AND queen.ack_verdict(c.committed, c.committed, c.lease_id, c.lease_expires_at, 'completed', p_lease_id) = 'apply'
               AND EXISTS (SELECT FROM owner) AND (v_segs = 0 OR EXISTS (SELECT FROM moved))
               AND (v_dedups = 0 OR (SELECT count(*) FROM recorded) = v_dedups)
            RETURNING c.committed),
        stored AS (
            INSERT INTO queen.log_segments
                (partition_id, base_offset, frame_count, body, checksum, txids, min_created_at, max_created_at)
            SELECT p_seg_partitions[1], m.base, p_seg_frames[1], p_seg_bodies[1], p_seg_checksums[1],
                   p_seg_txids[1 : p_seg_frames[1]], p_seg_min_at[1], p_seg_max_at[1]
              FROM moved m
             WHERE EXISTS (SELECT FROM acked)),
        deleted AS (
            DELETE FROM queen_streams.state s
             WHERE s.query_id = p_query_id AND s.partition_id = p_partition_id AND s.key = ANY (p_delete_keys)
               AND EXISTS (SELECT FROM acked)
            RETURNING 1),
        upserted AS (
            -- xmax is 0 on the rows the upsert inserted, not on those it updated.
            INSERT INTO queen_streams.state AS s (query_id, partition_id, key, value, updated_at)
            SELECT p_query_id, p_partition_id, u.key, u.value, now()
              FROM unnest(p_upsert_keys, p_upsert_values) AS u (key, value)
             WHERE EXISTS (SELECT FROM acked)
            ON CONFLICT (query_id, partition_id, key)
            DO UPDATE SET value = EXCLUDED.value, updated_at = EXCLUDED.updated_at
            RETURNING s.xmax = 0 AS inserted)
        SELECT o.id, o.name, o.next_offset, (SELECT m.base FROM moved m), (SELECT array_agg(r.transaction_id) FROM recorded r),
               (SELECT a.committed FROM acked a), (SELECT count(*) FILTER (WHERE u.inserted) FROM upserted u),
               (SELECT count(*) FROM deleted)
          INTO queue_id, queue_name, v_next, v_base, v_recorded, v_committed, v_inserted, v_deleted
          FROM owner o;
        IF v_committed IS NOT NULL THEN
            IF v_inserted <> v_deleted THEN
                PERFORM queen_streams.state_rows_add(p_tenant => p_tenant, p_query_id => p_query_id,
                                                     p_partition_id => p_partition_id, p_delta => v_inserted - v_deleted);
            END IF;
            outcome := 'committed';
            base_offsets := CASE WHEN v_segs = 0 THEN '{}' ELSE ARRAY[v_base] END;
            ack_count := p_count;
            lease_released := true;
            announce := v_next > v_committed;
            RETURN NEXT;
            RETURN;
        END IF;
        IF v_base IS NOT NULL THEN
            PERFORM queen.log_push_undo(p_partitions => p_seg_partitions, p_frames => p_seg_frames,
                                        p_bodies => p_seg_bodies);
            DELETE FROM queen.push_dedup x
             WHERE x.partition_id = p_seg_partitions[1] AND x.transaction_id = ANY (v_recorded);
        END IF;
    END IF;
    RETURN QUERY SELECT * FROM queen_streams.cycle_v3(
        p_tenant => p_tenant, p_query_id => p_query_id, p_partition_id => p_partition_id, p_group =>
        p_group, p_upsert_keys => p_upsert_keys, p_upsert_values => p_upsert_values, p_delete_keys
        => p_delete_keys, p_expect_keys => p_expect_keys, p_expect_at => p_expect_at,
        p_seg_partitions => p_seg_partitions, p_seg_frames => p_seg_frames, p_seg_bodies =>
        p_seg_bodies, p_seg_checksums => p_seg_checksums, p_seg_txids => p_seg_txids, p_seg_min_at
        => p_seg_min_at, p_seg_max_at => p_seg_max_at, p_seg_dedups => p_seg_dedups, p_dedup_txids
        => p_dedup_txids, p_dedup_msg_ids => p_dedup_msg_ids, p_ack => p_ack, p_lease_id =>
        p_lease_id, p_ack_ok => p_ack_ok, p_count => p_count, p_release => p_release,
        p_generation => p_generation);
END
$$;
