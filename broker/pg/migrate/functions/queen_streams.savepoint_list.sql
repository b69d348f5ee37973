-- The savepoints of the tenant's query p_name, newest first.
-- PL/pgSQL, not SQL: Citus refuses a SQL function over its tables that runs
-- with parameters (CITUS.md).
CREATE OR REPLACE FUNCTION queen_streams.savepoint_list(p_tenant text, p_name text)
RETURNS TABLE (name text, taken_at timestamptz, config_hash text, state_rows bigint, cursors integer)
LANGUAGE plpgsql STABLE AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    SELECT s.name, s.taken_at, s.config_hash, s.state_rows, s.cursors
      FROM queen_streams.savepoints s JOIN queen_streams.queries q ON q.id = s.query_id
     WHERE q.tenant = p_tenant AND q.name = p_name
     ORDER BY s.taken_at DESC, s.name;
END
$$;
