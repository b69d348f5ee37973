-- Drops the savepoints of the tenant's query p_name beyond the newest
-- p_keep, and returns how many it dropped.
-- PL/pgSQL, not SQL: Citus refuses a SQL function over its tables that runs
-- with parameters (CITUS.md).
CREATE OR REPLACE FUNCTION queen_streams.savepoint_prune(p_tenant text, p_name text, p_keep integer)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    n integer;
BEGIN
    DELETE FROM queen_streams.savepoints s
     USING (SELECT l.name FROM queen_streams.savepoint_list(p_tenant, p_name) l OFFSET greatest(p_keep, 0)) old,
           queen_streams.queries q
     WHERE q.tenant = p_tenant AND q.name = p_name AND s.query_id = q.id AND s.name = old.name;
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END
$$;
