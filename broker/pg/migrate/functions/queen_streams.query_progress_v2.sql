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
DECLARE
    v_id   uuid;
    v_gen  bigint;
    v_rows bigint;
    v_last timestamptz;
    v_p    record;
    v_oldest timestamptz;
BEGIN
    -- The query, its state, then its source: a statement each, on Citus
    -- none of them a sub-select over a distributed table that refers to a
    -- catalog row.
    SELECT q.id, q.reset_generation INTO v_id, v_gen
      FROM queen_streams.queries q WHERE q.tenant = p_tenant AND q.name = p_name;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    SELECT count(*), max(s.updated_at) INTO v_rows, v_last FROM queen_streams.state s WHERE s.query_id = v_id;
    lag := 0;
    -- The oldest message is asked of each partition with messages left, a
    -- call each: on Citus a function called from a statement over the
    -- shards would run on a shard, where it may not query the others.
    FOR v_p IN SELECT p.id, COALESCE(c.committed, 0) AS committed, p.next_offset, c.last_consumed_at
                 FROM queen.queues qu
                 JOIN queen.partitions p ON p.queue_id = qu.id
                 LEFT JOIN queen.cursors c ON c.partition_id = p.id AND c.consumer_group = p_group
                WHERE qu.tenant = p_tenant AND qu.name = p_source LOOP
        v_last := GREATEST(v_last, v_p.last_consumed_at);
        IF v_p.next_offset > v_p.committed THEN
            lag := lag + (v_p.next_offset - v_p.committed);
            SELECT o.oldest INTO v_oldest
              FROM queen.oldest_unconsumed(p_partition_id => v_p.id, p_committed => v_p.committed,
                                           p_next_offset => v_p.next_offset) o;
            IF FOUND THEN
                oldest := LEAST(oldest, v_oldest);
            END IF;
        END IF;
    END LOOP;
    state_rows := v_rows;
    last_cycle := v_last;
    reset_generation := v_gen;
    RETURN NEXT;
END
$$;
