-- Walks up to p_count frames forward from offset p_from over the real
-- segments of a partition, never past p_limit, skipping the gaps retention
-- leaves. Returns the offset just past the last frame walked and how many
-- frames that was (fewer than p_count when the range runs out).
CREATE OR REPLACE FUNCTION queen_streams.walk_frames(
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
