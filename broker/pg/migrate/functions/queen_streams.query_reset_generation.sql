-- The reset generation of the tenant's query (see queen_streams.queries),
-- or NULL when the tenant has no query of that name.
-- PL/pgSQL, not SQL: Citus refuses a SQL function over its tables that runs
-- with parameters (CITUS.md).
CREATE OR REPLACE FUNCTION queen_streams.query_reset_generation(p_tenant text, p_name text)
RETURNS bigint LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN (SELECT reset_generation FROM queen_streams.queries WHERE tenant = p_tenant AND name = p_name);
END
$$;
