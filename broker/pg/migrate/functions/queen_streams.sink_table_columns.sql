-- The columns of the tenant's table p_table in its schema
-- (queen_streams.tenant_schema, which p_schema, when not NULL, must be), in order: no rows when there is no such
-- table. type is PostgreSQL's name of the column's type; required says
-- that a row must give the column a value (NOT NULL, and no default,
-- identity or generation fills it). The operator checks them against
-- the pipeline's output.
CREATE OR REPLACE FUNCTION queen_streams.sink_table_columns(p_tenant text, p_schema text, p_table text)
RETURNS TABLE (name text, type text, required boolean) LANGUAGE sql STABLE AS $$
    SELECT a.attname::text, format_type(a.atttypid, a.atttypmod),
           a.attnotnull AND NOT a.atthasdef AND a.attidentity = '' AND a.attgenerated = ''
      FROM pg_class c
      JOIN pg_namespace n ON n.oid = c.relnamespace
      JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
     WHERE n.nspname = queen_streams.tenant_schema(p_tenant, p_schema) AND c.relname = p_table AND c.relkind IN ('r', 'p')
     ORDER BY a.attnum
$$;
