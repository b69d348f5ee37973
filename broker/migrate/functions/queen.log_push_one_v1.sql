-- The allocator: the only statement that moves a partition's next_offset
-- and stores a segment, already packed by the broker, at the base offset it
-- assigns. queen.log_push calls it for every segment of a request, once it
-- holds the partition's lock and has recorded the segment's client
-- transaction ids; every write into the log (the push route, a
-- transaction's pushes, the streams cycle's sink pushes) goes through it.
-- It also keeps the partition's stored_bytes, which the tenant quota's
-- maxStoredBytes is checked against.
CREATE OR REPLACE FUNCTION queen.log_push_one_v1(
    p_partition_id   uuid,
    p_frame_count    integer,
    p_body           bytea,
    p_checksum       bigint,
    p_txids          text[],
    p_min_created_at timestamptz,
    p_max_created_at timestamptz,
    OUT base_offset  bigint,
    OUT queue_id     uuid
) LANGUAGE plpgsql AS $$
BEGIN
    UPDATE queen.partitions p
       SET next_offset = p.next_offset + p_frame_count,
           last_push_at = p_max_created_at,
           stored_bytes = p.stored_bytes + octet_length(p_body)
     WHERE p.id = p_partition_id
    RETURNING p.next_offset - p_frame_count, p.queue_id INTO base_offset, queue_id;
    INSERT INTO queen.log_segments
        (partition_id, base_offset, frame_count, body, checksum, txids, min_created_at, max_created_at)
    VALUES
        (p_partition_id, base_offset, p_frame_count, p_body, p_checksum, p_txids, p_min_created_at, p_max_created_at);
END
$$;
