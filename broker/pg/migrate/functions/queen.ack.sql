-- The general ack of the previous release's brokers, kept one release
-- (migrate.Previous): queen.ack_v2 on its first item's partition.
CREATE OR REPLACE FUNCTION queen.ack(
    p_tenant           text,
    p_partition_ids    uuid[],
    p_groups           text[],
    p_txids            text[],
    p_statuses         text[],
    p_lease_ids        uuid[],
    p_errors           text[],
    p_dlq_items        integer[],
    p_dlq_message_ids  uuid[],
    p_dlq_payloads     bytea[],
    p_dlq_key_ids      bigint[],
    p_dlq_created      timestamptz[]
) RETURNS TABLE (
    item             integer,
    queue_id         uuid,
    success          boolean,
    error            text,
    queue_name       text,
    partition_name   text,
    lease_released   boolean,
    dlq              boolean,
    announce         boolean,
    frame_offset     bigint,
    segment_base     bigint,
    segment_frames   integer,
    segment_body     bytea,
    segment_checksum bigint
) LANGUAGE plpgsql AS $$
BEGIN
    RETURN QUERY SELECT * FROM queen.ack_v2(p_partition_ids[1], p_tenant, p_partition_ids, p_groups, p_txids, p_statuses,
                                            p_lease_ids, p_errors, p_dlq_items, p_dlq_message_ids, p_dlq_payloads,
                                            p_dlq_key_ids, p_dlq_created);
END
$$;
