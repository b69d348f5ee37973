-- A cycle (queen_streams.cycle_v2, which holds the cycle's rules) that
-- may carry the reset generation its worker registered under
-- (queen_streams.register_v2). With p_generation set, the cycle is refused
-- when the query's reset generation has moved since: a reset, a new config
-- hash under upgradeMode Reset or Savepoint, or a savepoint's restore
-- happened, and the worker folds the old shape into state that is no
-- longer its own. The check runs under the (query, partition) lock that
-- the reset and the restore wait for (queen_streams.query_lock_cycles), so
-- a cycle either commits before the reset or is refused after it; the
-- ownership verdicts of queen_streams.cycle_owner come first. NULL checks
-- nothing, for workers that do not send it.
CREATE OR REPLACE FUNCTION queen_streams.cycle_v3(
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
DECLARE
    v_generation bigint;
BEGIN
    IF p_generation IS NOT NULL THEN
        PERFORM queen_streams.cycle_owner(p_tenant, p_query_id, p_partition_id);
        SELECT q.reset_generation INTO v_generation FROM queen_streams.queries q WHERE q.id = p_query_id;
        IF v_generation <> p_generation THEN
            RAISE EXCEPTION 'stale generation: the query was reset or restored (generation %) since this worker registered (generation %); register again',
                v_generation, p_generation
                USING DETAIL = 'streams.stale_generation';
        END IF;
    END IF;
    RETURN QUERY SELECT * FROM queen_streams.cycle_v2(
        p_tenant => p_tenant, p_query_id => p_query_id, p_partition_id => p_partition_id, p_group =>
        p_group, p_upsert_keys => p_upsert_keys, p_upsert_values => p_upsert_values, p_delete_keys
        => p_delete_keys, p_expect_keys => p_expect_keys, p_expect_at => p_expect_at,
        p_seg_partitions => p_seg_partitions, p_seg_frames => p_seg_frames, p_seg_bodies =>
        p_seg_bodies, p_seg_checksums => p_seg_checksums, p_seg_txids => p_seg_txids, p_seg_min_at
        => p_seg_min_at, p_seg_max_at => p_seg_max_at, p_seg_dedups => p_seg_dedups, p_dedup_txids
        => p_dedup_txids, p_dedup_msg_ids => p_dedup_msg_ids, p_ack => p_ack, p_lease_id =>
        p_lease_id, p_ack_ok => p_ack_ok, p_count => p_count, p_release => p_release);
END
$$;
