-- The schema a tenant's table sinks live in: regent_<tenant>, the tenant's
-- name as it is (a quoted identifier, so "Acme" and "acme" are two). A
-- sink's table name is resolved in it and nowhere else: it is the whole
-- boundary between tenants' tables. p_schema, when not NULL, is the schema
-- a request named, which must be this one: the refusal names no other
-- tenant's table, so that nothing is learnt of one. PostgreSQL cuts an
-- identifier at 63 bytes, which would give two tenants one schema, so a
-- longer one is refused instead.
CREATE OR REPLACE FUNCTION queen_streams.tenant_schema(p_tenant text, p_schema text)
RETURNS text LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF octet_length('regent_' || p_tenant) > 63 THEN
        RAISE EXCEPTION 'tenant %: its name is too long for a table sink''s schema (regent_<tenant> is at most 63 bytes)',
            quote_literal(p_tenant) USING DETAIL = 'streams.sink_invalid';
    END IF;
    IF p_schema IS NOT NULL AND p_schema <> 'regent_' || p_tenant THEN
        RAISE EXCEPTION 'schema % is not tenant %''s: a query writes only into its tenant''s schema, %', quote_ident(p_schema),
            quote_literal(p_tenant), quote_ident('regent_' || p_tenant) USING DETAIL = 'streams.sink_invalid';
    END IF;
    RETURN 'regent_' || p_tenant;
END
$$;
