-- Sets whether the tenant's query is suspended (spec.suspend of its
-- StreamQuery; see queen_streams.queries.suspended) and reports whether the
-- query exists. Writes only a change. A resume announces the source
-- partitions that hold messages the query's group has not consumed, so
-- that the pops of every replica look at them again at once rather than at
-- their next reseed: while suspended, the group's pops settled nothing.
CREATE OR REPLACE FUNCTION queen_streams.query_suspend(p_tenant text, p_name text, p_group text, p_suspended boolean)
RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    v_source text;
    v_notes  text[];
BEGIN
    UPDATE queen_streams.queries q SET suspended = p_suspended
     WHERE q.tenant = p_tenant AND q.name = p_name AND q.suspended <> p_suspended
    RETURNING q.source_queue INTO v_source;
    IF FOUND AND NOT p_suspended THEN
        -- Read first, announced after: on Citus a NOTIFY in a statement over
        -- the shards would run on the workers, where no broker listens.
        SELECT array_agg(qu.id || ':' || p.id) INTO v_notes
          FROM queen.queues qu
          JOIN queen.partitions p ON p.queue_id = qu.id
          LEFT JOIN queen.cursors c ON c.partition_id = p.id AND c.consumer_group = p_group
         WHERE qu.tenant = p_tenant AND qu.name = v_source AND p.next_offset > COALESCE(c.committed, 0);
        PERFORM pg_notify('regent_log', n) FROM unnest(v_notes) AS n;
    END IF;
    RETURN EXISTS (SELECT FROM queen_streams.queries q WHERE q.tenant = p_tenant AND q.name = p_name);
END
$$;
