-- The previous release's cycle, kept for one release (migrate.Previous):
-- brokers of that release call it during a rolling upgrade. It is
-- queen_streams.cycle_v5 with the request spread over its arguments.
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
) LANGUAGE sql AS $$
    SELECT * FROM queen_streams.cycle_v5(ROW(p_tenant, p_query_id, p_partition_id, p_group, p_upsert_keys,
        p_upsert_values, p_delete_keys, p_expect_keys, p_expect_at, p_seg_partitions, p_seg_frames, p_seg_bodies,
        p_seg_checksums, p_seg_txids, p_seg_min_at, p_seg_max_at, p_seg_dedups, p_dedup_txids, p_dedup_msg_ids,
        p_ack, p_lease_id, p_ack_ok, p_count, p_release, p_generation)::queen_streams.cycle_request)
$$;
