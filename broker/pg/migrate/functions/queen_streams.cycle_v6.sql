-- One POST /streams/v1/cycle, one call (broker/pg/db): queen_streams.cycle_v5,
-- the cycle of the previous release's brokers, which they still call, and
-- then, once it answers 'committed', its table rows
-- (queen_streams.cycle_table), in the same transaction: a cycle's state,
-- its sink pushes, its ack and its rows commit together or not at all.
-- p_table_rows NULL (what every request without table_rows passes) is
-- cycle_v5 exactly. A request type of its own would have needed no second
-- argument, but the previous release's brokers build
-- ROW(...)::queen_streams.cycle_request with the fields they know, which a
-- longer type refuses.
CREATE OR REPLACE FUNCTION queen_streams.cycle_v6(r queen_streams.cycle_request, p_table_rows jsonb)
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
