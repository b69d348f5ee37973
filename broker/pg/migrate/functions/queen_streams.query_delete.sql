-- Deletes the tenant's query and, by cascade, its state. True when there
-- was one.
-- PL/pgSQL, not SQL: Citus refuses a SQL function over its tables that runs
-- with parameters (CITUS.md).
CREATE OR REPLACE FUNCTION queen_streams.query_delete(p_tenant text, p_name text)
RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM queen_streams.queries WHERE tenant = p_tenant AND name = p_name;
    RETURN FOUND;
END
$$;
