-- How many partitions of the tenant's query p_name's source queue its
-- consumer group p_group holds a live lease on: a worker that holds one may
-- still commit a cycle. An upgrade waits for none before it resets.
-- PL/pgSQL, not SQL: Citus refuses a SQL function over its tables that runs
-- with parameters (CITUS.md).
CREATE OR REPLACE FUNCTION queen_streams.query_leases(p_tenant text, p_name text, p_group text)
RETURNS integer LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN (SELECT count(*)::integer
      FROM queen_streams.queries q
      JOIN queen.queues qu ON qu.tenant = q.tenant AND qu.name = q.source_queue
      JOIN queen.partitions p ON p.queue_id = qu.id
      JOIN queen.cursors c ON c.partition_id = p.id AND c.consumer_group = p_group
     WHERE q.tenant = p_tenant AND q.name = p_name
       AND c.lease_id IS NOT NULL AND queen.lease_live(c.lease_expires_at));
END
$$;
