-- Removes the tenant's grant: new query names are then refused, and the
-- tenant's existing queries keep running, and no other limit applies any
-- more. The NOTIFY tells every broker to re-read the limits.
-- PL/pgSQL, not SQL: Citus refuses a SQL function over its tables that runs
-- with parameters (CITUS.md).
CREATE OR REPLACE FUNCTION queen_streams.quota_delete(p_tenant text)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM queen_streams.quota WHERE tenant = p_tenant;
    PERFORM pg_notify('regent_quota', '');
END
$$;
