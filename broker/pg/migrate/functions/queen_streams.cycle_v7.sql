-- One POST /streams/v1/cycle, one call (broker/pg/db): queen_streams.cycle_v5
-- (the cycle's family of functions), and then, once it answers
-- 'committed', its table rows (queen_streams.cycle_table), in the same
-- transaction: a cycle's state, its sink pushes, its ack and its rows
-- commit together or not at all. p_table_rows NULL (what every request
-- without table_rows passes) is cycle_v5 exactly. The rows are an argument
-- of their own, not a field of the request: the previous release's brokers
-- build ROW(...)::queen_streams.cycle_request with the fields they know,
-- which a longer type refuses.
--
-- p_shard is the source partition, r.partition_id: on Citus it is the
-- distribution argument (migrate's Citus mode distributes the function
-- with queen.partitions), so that the coordinator sends the whole cycle to
-- the worker holding the partition, which runs it next to its state, its
-- cursor and its lock (queen_streams.cycle_owner). A sink partition on
-- another node is written from there, in two phases. A cycle with table
-- rows is called through queen_streams.cycle_v6 instead, since the query's
-- table lives on the coordinator (CITUS.md). On PostgreSQL it is unused.
CREATE OR REPLACE FUNCTION queen_streams.cycle_v7(p_shard uuid, r queen_streams.cycle_request, p_table_rows jsonb)
RETURNS SETOF queen_streams.cycle_answer LANGUAGE plpgsql AS $$
DECLARE
    a queen_streams.cycle_answer;
BEGIN
    FOR a IN SELECT * FROM queen_streams.cycle_v5(r) LOOP
        IF a.outcome = 'committed' AND jsonb_array_length(p_table_rows) > 0 THEN
            PERFORM queen_streams.cycle_table(r, p_table_rows);
        END IF;
        RETURN NEXT a;
    END LOOP;
END
$$;
