-- Kept one release for the previous brokers (migrate.Previous): drops up to
-- p_chunk segments of a queue that lie wholly below their partition's
-- floor, as queen.segments_below_floors and queen.drop_below_floors_v2 do
-- (their files say how), and returns how many went.
CREATE OR REPLACE FUNCTION queen.drop_below_floors(p_queue_id uuid, p_chunk integer)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    g   record;
    v_n integer := 0;
BEGIN
    FOR g IN SELECT b.shard, b.partitions FROM queen.segments_below_floors(p_queue_id) b LOOP
        EXIT WHEN v_n >= p_chunk;
        v_n := v_n + queen.drop_below_floors_v2(g.shard, g.partitions, p_chunk - v_n);
    END LOOP;
    RETURN v_n;
END
$$;
