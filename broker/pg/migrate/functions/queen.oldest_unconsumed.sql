-- The creation time of the oldest message at or after offset p_committed
-- of the partition, at segment granularity: the min_created_at of the
-- segment holding p_committed, or of the first after it when retention
-- removed that one. No row when p_committed has reached p_next_offset (the
-- partition's next_offset). Both lookups are range scans of the segments'
-- primary key. PL/pgSQL, not SQL: Citus refuses a SQL function over its
-- tables that the planner inlines with parameters (CITUS.md), and a
-- PL/pgSQL function keeps its plan for the session.
CREATE OR REPLACE FUNCTION queen.oldest_unconsumed(p_partition_id uuid, p_committed bigint, p_next_offset bigint)
RETURNS TABLE (oldest timestamptz) LANGUAGE plpgsql STABLE AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    SELECT s.min_created_at FROM queen.log_segments s
     WHERE p_committed < p_next_offset AND s.partition_id = p_partition_id
       AND s.base_offset >= coalesce((SELECT max(s2.base_offset) FROM queen.log_segments s2
                                       WHERE s2.partition_id = p_partition_id AND s2.base_offset <= p_committed), 0)
       AND s.base_offset + s.frame_count > p_committed
     ORDER BY s.base_offset LIMIT 1;
END
$$;
