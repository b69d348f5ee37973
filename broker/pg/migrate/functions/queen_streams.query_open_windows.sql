-- How many of a query's state rows its workers have still to emit: the
-- open windows of its pipeline, the rows under p_prefix but p_clock, the
-- clock row each partition keeps (the key layout is the pipeline's, which
-- the caller passes). The operator's autoscaler keeps a query's workers
-- while any is left, since only a running worker's idle flush emits a
-- window once the source has gone quiet. One range scan of the query's
-- state rows.
-- PL/pgSQL, not SQL: Citus refuses a SQL function over its tables that runs
-- with parameters (CITUS.md).
CREATE OR REPLACE FUNCTION queen_streams.query_open_windows(p_tenant text, p_name text, p_prefix text, p_clock text)
RETURNS bigint LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN (SELECT count(*)
      FROM queen_streams.queries q
      JOIN queen_streams.state s ON s.query_id = q.id
     WHERE q.tenant = p_tenant AND q.name = p_name
       AND starts_with(s.key, p_prefix) AND s.key <> p_clock);
END
$$;
