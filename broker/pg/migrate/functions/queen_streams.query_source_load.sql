-- How the source queue of a query is loaded, for the operator's autoscaler
-- (a query's workers scale on it). One row, also for a queue that does not
-- exist yet (0 and NULL):
--   partitions_behind: partitions of p_source (of p_tenant) holding
--     messages that p_group, the query's consumer group, has not consumed:
--     the most workers that can have work at once, since the broker leases
--     a partition to one consumer of a group at a time. Offsets removed by
--     retention (below floor_offset) do not count: no worker can pop them;
--   last_push: when a message was last pushed to any of its partitions,
--     NULL when none ever was: how long the source has been quiet.
-- PL/pgSQL, not SQL: Citus refuses a SQL function over its tables that runs
-- with parameters (CITUS.md).
CREATE OR REPLACE FUNCTION queen_streams.query_source_load(p_tenant text, p_source text, p_group text)
RETURNS TABLE (partitions_behind bigint, last_push timestamptz)
LANGUAGE plpgsql STABLE AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    SELECT count(*) FILTER (WHERE p.next_offset > GREATEST(COALESCE(c.committed, 0), p.floor_offset)),
           max(p.last_push_at)
      FROM queen.queues qu
      JOIN queen.partitions p ON p.queue_id = qu.id
      LEFT JOIN queen.cursors c ON c.partition_id = p.id AND c.consumer_group = p_group
     WHERE qu.tenant = p_tenant AND qu.name = p_source;
END
$$;
