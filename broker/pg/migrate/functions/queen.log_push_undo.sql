-- Takes back what queen.log_push_one_v1 moved for a request that writes
-- nothing (a partition gone, or duplicates): each partition's next_offset
-- moves back by its segment's frames, its stored_bytes by its segment's
-- body, and its last_push_at is again that of its newest segment. The caller still holds the partitions' locks, so
-- nobody allocated after it.
CREATE OR REPLACE FUNCTION queen.log_push_undo(
    p_partitions uuid[],
    p_frames     integer[],
    p_bodies     bytea[]
) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    UPDATE queen.partitions p
       SET next_offset = p.next_offset - u.frames,
           stored_bytes = p.stored_bytes - octet_length(u.body),
           last_push_at = (SELECT s.max_created_at FROM queen.log_segments s
                            WHERE s.partition_id = p.id ORDER BY s.base_offset DESC LIMIT 1)
      FROM unnest(p_partitions, p_frames, p_bodies) AS u (pid, frames, body)
     WHERE p.id = u.pid;
END
$$;
