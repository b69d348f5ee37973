-- What the tenant's query has done, for its StreamQuery's status. No row
-- when the tenant has no query of that name.
--   lag: messages of the source queue not yet consumed by p_group, the
--     query's consumer group: next_offset minus committed, per partition
--     (offsets removed by retention still count, so it can overstate);
--   oldest: the creation time of the oldest of those messages, at segment
--     granularity (queen.oldest_unconsumed), NULL when there is none; a
--     partition the group has not reached counts from its start, as lag
--     does;
--   state_rows: the query's state rows;
--   last_cycle: the later of the newest state write and the group's last
--     ack, NULL when the query has done neither;
--   reset_generation: how many registrations have reset the query's state
--     (the operator's witness that a reset it sent has committed).
-- Successor of queen_streams.query_progress, which has no oldest.
-- PL/pgSQL, not SQL: Citus refuses a SQL function over its tables that runs
-- with parameters (CITUS.md).
CREATE OR REPLACE FUNCTION queen_streams.query_progress_v2(p_tenant text, p_name text, p_group text, p_source text)
RETURNS TABLE (lag bigint, oldest timestamptz, state_rows bigint, last_cycle timestamptz, reset_generation bigint)
LANGUAGE plpgsql STABLE AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    SELECT src.lag, src.oldest, st.n, GREATEST(st.last, src.last), q.reset_generation
      FROM queen_streams.queries q
     CROSS JOIN LATERAL (
            SELECT count(*) AS n, max(s.updated_at) AS last
              FROM queen_streams.state s
             WHERE s.query_id = q.id) st
     CROSS JOIN LATERAL (
            SELECT COALESCE(sum(GREATEST(p.next_offset - COALESCE(c.committed, 0), 0)), 0)::bigint AS lag,
                   min(o.oldest) AS oldest,
                   max(c.last_consumed_at) AS last
              FROM queen.queues qu
              JOIN queen.partitions p ON p.queue_id = qu.id
              LEFT JOIN queen.cursors c ON c.partition_id = p.id AND c.consumer_group = p_group
              LEFT JOIN LATERAL queen.oldest_unconsumed(p_partition_id => p.id, p_committed => COALESCE(c.committed, 0),
                                                        p_next_offset => p.next_offset) o ON true
             WHERE qu.tenant = p_tenant AND qu.name = p_source) src
     WHERE q.tenant = p_tenant AND q.name = p_name;
END
$$;
