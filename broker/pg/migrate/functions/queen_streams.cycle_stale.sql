-- Rules 4 and 5 of queen_streams.cycle_rules: the state rows a cycle
-- expects (expect_keys) that are not as the worker read them. A row named
-- with the updated_at the worker read (expect_at) is stale when it changed
-- or is gone; one named without (an idle flush's delete, implicit) when it
-- is gone, or changed since a ripe read last returned it (ripe_read_at).
-- At most one row: the first whose expectation the worker sent.
-- PL/pgSQL, not SQL: Citus refuses a SQL function over its tables that the
-- planner inlines with parameters (CITUS.md); callers ask only when the
-- request expects rows.
CREATE OR REPLACE FUNCTION queen_streams.cycle_stale(r queen_streams.cycle_request)
RETURNS TABLE (key text, implicit boolean, gone boolean) LANGUAGE plpgsql STABLE AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    SELECT e.key, e.at IS NULL, s.key IS NULL
      FROM unnest(r.expect_keys, r.expect_at) AS e (key, at)
      LEFT JOIN queen_streams.state s
        ON s.query_id = r.query_id AND s.partition_id = r.partition_id AND s.key = e.key
     WHERE s.key IS NULL OR s.updated_at <> coalesce(e.at, s.ripe_read_at)
     ORDER BY e.at IS NULL
     LIMIT 1;
END
$$;
