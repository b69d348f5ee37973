-- Kept one release for the previous brokers (migrate.Previous): raises the
-- floors of a queue's partitions for one age limit, in the caller's
-- transaction, as queen.floors_to_raise and queen.raise_floors_v2 do (their
-- files say how), and returns a row per partition whose floor rose.
CREATE OR REPLACE FUNCTION queen.raise_floors(p_queue_id uuid, p_seconds integer, p_consumed boolean)
RETURNS TABLE (partition_id uuid, removed bigint, released boolean) LANGUAGE plpgsql AS $$
DECLARE
    g record;
BEGIN
    FOR g IN SELECT f.shard, f.partitions, f.floors FROM queen.floors_to_raise(p_queue_id, p_seconds, p_consumed) f LOOP
        RETURN QUERY SELECT r.partition_id, r.removed, r.released FROM queen.raise_floors_v2(g.shard, g.partitions, g.floors) r;
    END LOOP;
END
$$;
