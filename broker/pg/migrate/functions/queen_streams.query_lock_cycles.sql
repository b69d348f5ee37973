-- Waits for every cycle of the tenant's query p_query_id, whose source
-- queue is p_source, and keeps new ones out until the caller's transaction
-- ends: it takes the advisory lock of every (query, partition) the query's
-- cycles could hold (queen_streams.cycle_owner), in partition order. What
-- the caller then reads or writes of the query's state and its group's
-- cursors falls between two cycles, never inside one.
-- PL/pgSQL, not SQL: Citus refuses a SQL function over its tables that runs
-- with parameters (CITUS.md).
CREATE OR REPLACE FUNCTION queen_streams.query_lock_cycles(p_tenant text, p_query_id uuid, p_source text)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    v_pids uuid[];
    v_pid  uuid;
BEGIN
    -- The partitions first, then the locks, a statement each, in
    -- partition order: on Citus an advisory lock is the node's, and each
    -- is taken on the partition's row, on the node that holds its shard,
    -- where its cycles take it (queen_streams.cycle_owner).
    SELECT array_agg(x.pid ORDER BY x.pid) INTO v_pids
      FROM (SELECT p.id AS pid FROM queen.partitions p JOIN queen.queues qu ON qu.id = p.queue_id
             WHERE qu.tenant = p_tenant AND qu.name = p_source
            UNION
            SELECT DISTINCT s.partition_id FROM queen_streams.state s WHERE s.query_id = p_query_id) x;
    FOREACH v_pid IN ARRAY coalesce(v_pids, '{}') LOOP
        PERFORM pg_advisory_xact_lock(hashtextextended(p_query_id::text || p.id::text, 0))
           FROM queen.partitions p WHERE p.id = v_pid;
    END LOOP;
END
$$;
