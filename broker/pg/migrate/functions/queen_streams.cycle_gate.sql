-- The gate in front of a cycle's short path and its rules: the ownership
-- verdicts and the (query, partition) lock of queen_streams.cycle_owner
-- first, then the reset generation the worker registered under
-- (queen_streams.register_v2), when the request carries one. The cycle is
-- refused when the query's reset generation has moved since: a reset, a new
-- config hash under upgradeMode Reset or Savepoint, or a savepoint's
-- restore happened, and the worker folds the old shape into state that is
-- no longer its own. The check runs under the lock that the reset and the
-- restore wait for (queen_streams.query_lock_cycles), so a cycle either
-- commits before the reset or is refused after it. NULL checks nothing,
-- for workers that do not send it. Answers cycle_owner's source queue and
-- next_offset.
CREATE OR REPLACE FUNCTION queen_streams.cycle_gate(
    r               queen_streams.cycle_request,
    OUT queue_id    uuid,
    OUT queue_name  text,
    OUT next_offset bigint
) LANGUAGE plpgsql AS $$
DECLARE
    v_generation bigint;
BEGIN
    SELECT o.queue_id, o.queue_name, o.next_offset INTO queue_id, queue_name, next_offset
      FROM queen_streams.cycle_owner(r.tenant, r.query_id, r.partition_id) o;
    IF r.generation IS NOT NULL THEN
        SELECT q.reset_generation INTO v_generation FROM queen_streams.queries q WHERE q.id = r.query_id;
        IF v_generation <> r.generation THEN
            RAISE EXCEPTION 'stale generation: the query was reset or restored (generation %) since this worker registered (generation %); register again',
                v_generation, r.generation
                USING DETAIL = 'streams.stale_generation';
        END IF;
    END IF;
END
$$;
