-- The offsets of p_txids (queen.txid_offset_rows) as an array, in their
-- order.
-- PL/pgSQL, not SQL: Citus refuses a SQL function over its tables that runs
-- with parameters (CITUS.md).
CREATE OR REPLACE FUNCTION queen.txid_offsets(p_partition_id uuid, p_from bigint, p_to bigint, p_txids text[])
RETURNS bigint[] LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN (SELECT array_agg(r.off ORDER BY r.i) FROM queen.txid_offset_rows(p_partition_id, p_from, p_to, p_txids) r);
END
$$;
