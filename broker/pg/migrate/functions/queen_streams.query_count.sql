-- How many queries the tenant has registered.
-- PL/pgSQL, not SQL: Citus refuses a SQL function over its tables that runs
-- with parameters (CITUS.md).
CREATE OR REPLACE FUNCTION queen_streams.query_count(p_tenant text)
RETURNS bigint LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN (SELECT count(*) FROM queen_streams.queries WHERE tenant = p_tenant);
END
$$;
