-- queen_streams.cycle_next_v2 on the request's source partition, as a
-- function that Citus does not distribute: what queen_streams.cycle_v6 is
-- to cycle_v7, for a cycle with its next batch.
CREATE OR REPLACE FUNCTION queen_streams.cycle_next(
    r            queen_streams.cycle_request,
    p_table_rows jsonb,
    p_lease_id   uuid,
    p_batch      integer,
    p_max_bytes  bigint
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
    dup_message_ids uuid[],
    state_at        timestamptz,
    partition_name  text,
    retry_at        timestamptz,
    batch_start     bigint,
    batch_end       bigint,
    base_offset     bigint,
    frame_count     integer,
    body            bytea,
    checksum        bigint
) LANGUAGE plpgsql AS $$
BEGIN
    RETURN QUERY SELECT * FROM queen_streams.cycle_next_v2(r.partition_id, r, p_table_rows, p_lease_id, p_batch, p_max_bytes);
END
$$;
