-- How many queries the tenant has registered.
CREATE OR REPLACE FUNCTION queen_streams.query_count(p_tenant text)
RETURNS bigint LANGUAGE sql STABLE AS $$
    SELECT count(*) FROM queen_streams.queries WHERE tenant = p_tenant
$$;
