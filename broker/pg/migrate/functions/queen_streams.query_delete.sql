-- Deletes the tenant's query and, by cascade, its state. True when there
-- was one.
CREATE OR REPLACE FUNCTION queen_streams.query_delete(p_tenant text, p_name text)
RETURNS boolean LANGUAGE sql AS $$
    WITH d AS (DELETE FROM queen_streams.queries WHERE tenant = p_tenant AND name = p_name RETURNING 1)
    SELECT EXISTS (SELECT FROM d)
$$;
