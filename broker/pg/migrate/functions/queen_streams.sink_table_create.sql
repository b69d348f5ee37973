-- Creates the tenant's table p_table in its schema
-- (queen_streams.tenant_schema, created too when absent), with the columns
-- p_columns of types p_types and, when p_keys is not empty, a primary key
-- on them; true when it created it, false when the table was there. Every
-- identifier is quoted, and each type must name a type (regtype), so no
-- argument is ever read as SQL; a name PostgreSQL would cut is refused.
CREATE OR REPLACE FUNCTION queen_streams.sink_table_create(
    p_tenant text, p_table text, p_columns text[], p_types text[], p_keys text[])
RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    v_schema text := queen_streams.tenant_schema(p_tenant, NULL);
    v_cols   text;
BEGIN
    IF cardinality(p_columns) IS DISTINCT FROM cardinality(p_types) OR cardinality(p_columns) = 0 THEN
        RAISE EXCEPTION 'a table needs columns, each with a type' USING DETAIL = 'streams.sink_invalid';
    END IF;
    IF octet_length(p_table) > 63 OR EXISTS (SELECT FROM unnest(p_columns) c WHERE octet_length(c) > 63) THEN
        -- PostgreSQL would cut the name to another one.
        RAISE EXCEPTION 'table and column names are at most 63 bytes long' USING DETAIL = 'streams.sink_invalid';
    END IF;
    IF EXISTS (SELECT FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                WHERE n.nspname = v_schema AND c.relname = p_table) THEN
        RETURN false;
    END IF;
    SELECT string_agg(format('%I %s', c, t::regtype::text), ', ' ORDER BY i) INTO v_cols
      FROM unnest(p_columns, p_types) WITH ORDINALITY AS x (c, t, i);
    IF cardinality(p_keys) > 0 THEN
        v_cols := v_cols || format(', PRIMARY KEY (%s)', (SELECT string_agg(format('%I', k), ', ') FROM unnest(p_keys) k));
    END IF;
    EXECUTE format('CREATE SCHEMA IF NOT EXISTS %I', v_schema);
    EXECUTE format('CREATE TABLE %I.%I (%s)', v_schema, p_table, v_cols);
    RETURN true;
END
$$;
