-- Raises the refusal of a cycle's ack whose lease is not the live lease of
-- the group's cursor on the partition, saying which: none is held, another
-- worker's is, or it expired.
CREATE OR REPLACE FUNCTION queen_streams.refuse_lease(p_partition_id uuid, p_group text, p_lease_id uuid)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    v_cursor queen.cursors%ROWTYPE;
BEGIN
    SELECT * INTO v_cursor FROM queen.cursors c
     WHERE c.partition_id = p_partition_id AND c.consumer_group = p_group;
    IF NOT FOUND OR v_cursor.lease_id IS NULL THEN
        RAISE EXCEPTION 'invalid lease: no lease is held on this partition for consumer group %', p_group;
    END IF;
    IF v_cursor.lease_id <> p_lease_id THEN
        RAISE EXCEPTION 'invalid lease: the partition is leased to another worker';
    END IF;
    RAISE EXCEPTION 'invalid lease: the lease expired at %', v_cursor.lease_expires_at;
END
$$;
