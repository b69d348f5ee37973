-- The ownership verdicts of a cycle, and its serialisation: raises 'query
-- not found' when p_query_id is not the tenant's query, and 'partition not
-- found' when p_partition_id is not a partition of one of the tenant's
-- queues (a missing one reads the same), 'query suspended' when the
-- query's StreamQuery suspends it (queen_streams.queries.suspended), and
-- otherwise returns the source
-- partition's queue and next_offset. The advisory lock it takes serialises
-- every cycle on this (query, partition), idle flushes included (they take
-- no cursor lock), until the caller's transaction ends. The broker calls it
-- alone for a cycle whose state ops it refuses, so that these verdicts
-- come first whatever the ops say.
CREATE OR REPLACE FUNCTION queen_streams.cycle_owner(
    p_tenant       text,
    p_query_id     uuid,
    p_partition_id uuid,
    OUT queue_id    uuid,
    OUT queue_name  text,
    OUT next_offset bigint
) LANGUAGE plpgsql AS $$
DECLARE
    v_suspended boolean; -- NULL: not the tenant's query
BEGIN
    -- The lock, then one statement reads both; next_offset read here
    -- serves the cycle's announce: a push that lands after this read
    -- announces itself. The lock is taken in a statement on the
    -- partition's row: on Citus, advisory locks are per node, and so it is
    -- the node that holds the partition's shard, where a cycle delegated to
    -- it runs, that serialises its cycles. A partition that does not exist
    -- takes no lock, and is refused below.
    PERFORM pg_advisory_xact_lock(hashtextextended(p_query_id::text || p.id::text, 0))
       FROM queen.partitions p WHERE p.id = p_partition_id;
    SELECT (SELECT q.suspended FROM queen_streams.queries q WHERE q.id = p_query_id AND q.tenant = p_tenant),
           qu.id, qu.name, pa.next_offset
      INTO v_suspended, queue_id, queue_name, next_offset
      FROM (SELECT p_partition_id AS id) AS c
      LEFT JOIN queen.partitions pa ON pa.id = c.id
      -- The queue by its primary key: as a plain join, the generic plan
      -- read every queue of the tenant through the tenant index.
      LEFT JOIN LATERAL (SELECT q.id, q.name FROM queen.queues q
                          WHERE q.id = pa.queue_id AND q.tenant = p_tenant OFFSET 0) AS qu ON true;
    IF v_suspended IS NULL THEN
        RAISE EXCEPTION 'query not found';
    END IF;
    IF queue_id IS NULL THEN
        RAISE EXCEPTION 'partition not found';
    END IF;
    IF v_suspended THEN
        RAISE EXCEPTION 'query suspended';
    END IF;
END
$$;
