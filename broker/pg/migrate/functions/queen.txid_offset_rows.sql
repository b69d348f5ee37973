-- The offset of each of p_txids (NULL for none), one row per transaction id
-- with its 1-based position i, among the frames before p_to of the segments
-- that hold a partition's batch [p_from, p_to): frames before p_from in its
-- first segment count too, and answer as already acknowledged. Frames below
-- the partition's floor are deleted (by retention or eviction) and are not
-- found. Segments keep their frames' transaction ids outside the compressed
-- body for this. A transaction id found twice is its first frame.
-- PL/pgSQL, which keeps its plan for the session: a SQL function the
-- planner does not inline is parsed and planned again at each call, and one
-- it inlines with parameters is refused by Citus (CITUS.md).
CREATE OR REPLACE FUNCTION queen.txid_offset_rows(p_partition_id uuid, p_from bigint, p_to bigint, p_txids text[])
RETURNS TABLE (i bigint, off bigint) LANGUAGE plpgsql STABLE AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    SELECT u.i, f.off
      FROM unnest(p_txids) WITH ORDINALITY AS u (t, i)
      LEFT JOIN (
          SELECT t.txid, min(s.base_offset + t.n - 1) AS off
            FROM queen.log_segments s
           CROSS JOIN LATERAL unnest(s.txids) WITH ORDINALITY AS t (txid, n)
           WHERE s.partition_id = p_partition_id
             AND s.base_offset >= COALESCE((SELECT max(s2.base_offset) FROM queen.log_segments s2
                                             WHERE s2.partition_id = p_partition_id AND s2.base_offset <= p_from),
                                           p_from)
             AND s.base_offset < p_to
             AND s.base_offset + t.n - 1 < p_to
             AND s.base_offset + t.n - 1 >= (SELECT p.floor_offset FROM queen.partitions p WHERE p.id = p_partition_id)
           GROUP BY t.txid) f ON f.txid = u.t;
END
$$;
