-- queen_streams.cycle_v7 on the request's source partition, as a function
-- that Citus does not distribute: the broker calls it for a cycle with
-- table rows, which then runs where it is called, on the coordinator, where
-- the query's table is (a nested call is never delegated). The previous
-- release's brokers call it for every cycle. On PostgreSQL it is cycle_v7.
CREATE OR REPLACE FUNCTION queen_streams.cycle_v6(r queen_streams.cycle_request, p_table_rows jsonb)
RETURNS SETOF queen_streams.cycle_answer LANGUAGE plpgsql AS $$
BEGIN
    RETURN QUERY SELECT * FROM queen_streams.cycle_v7(r.partition_id, r, p_table_rows);
END
$$;
