-- How many rows the tenant's table p_table (in its schema,
-- queen_streams.tenant_schema) holds, for the console: counted exactly up
-- to a million; beyond, the planner's estimate (estimated true), so that a
-- listing never scans a large table. NULL when there is no such table,
-- or no table named (a query without a table sink).
CREATE OR REPLACE FUNCTION queen_streams.sink_table_rows(p_tenant text, p_table text, OUT rows bigint, OUT estimated boolean)
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_rel regclass;
BEGIN
    IF p_table IS NULL THEN
        RETURN;
    END IF;
    SELECT c.oid INTO v_rel
      FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE n.nspname = queen_streams.tenant_schema(p_tenant, NULL) AND c.relname = p_table AND c.relkind IN ('r', 'p');
    IF v_rel IS NULL THEN
        RETURN;
    END IF;
    EXECUTE format('SELECT count(*) FROM (SELECT FROM %s LIMIT 1000001) x', v_rel) INTO rows;
    estimated := rows > 1000000;
    IF estimated THEN
        SELECT GREATEST(c.reltuples, rows)::bigint INTO rows FROM pg_class c WHERE c.oid = v_rel;
    END IF;
END
$$;
