-- The pop of the previous release's brokers, kept one release
-- (migrate.Previous): queen.pop_v2 on its first candidate.
CREATE OR REPLACE FUNCTION queen.pop(
    p_tenant     text,
    p_queue_id   uuid,
    p_candidates uuid[],
    p_group      text,
    p_partitions integer,
    p_batch      integer,
    p_lease_id   uuid,
    p_sub_start  text,
    p_max_bytes  bigint
) RETURNS TABLE (
    partition_id   uuid,
    partition_name text,
    outcome        text,
    retry_at       timestamptz,
    batch_start    bigint,
    batch_end      bigint,
    base_offset    bigint,
    frame_count    integer,
    body           bytea,
    checksum       bigint
) LANGUAGE plpgsql AS $$
BEGIN
    RETURN QUERY SELECT * FROM queen.pop_v2(p_candidates[1], p_tenant, p_queue_id, p_candidates, p_group,
                                            p_partitions, p_batch, p_lease_id, p_sub_start, p_max_bytes);
END
$$;
