-- The short path of a cycle, for the common cycle of a fold: a success ack
-- that releases the lease and names its count. queen_streams.cycle_v5 calls
-- it after the gate and the sink pushes, with the answer so far (the source
-- queue and the segments' base offsets) and the source partition's
-- next_offset. It locks the cursor, checks the lease guard
-- (queen.ack_verdict, as queen_streams.cycle_rules asks it) and the rows
-- the worker read (rules 4 and 5 of cycle_rules), acknowledges the batch;
-- then the state is written (queen_streams.cycle_state) and the answer is
-- cycle_rules' 'committed' row. When the ack is not applied, it answers no
-- row and has written nothing, and cycle_rules gives the verdict: checked
-- one by one, in its order, with the same outcome. The verdict is asked in
-- PL/pgSQL, not in the UPDATE: Citus refuses a STABLE function (now())
-- of a row's columns there (CITUS.md).
CREATE OR REPLACE FUNCTION queen_streams.cycle_short(r queen_streams.cycle_request, a queen_streams.cycle_answer,
                                                     p_next_offset bigint)
RETURNS SETOF queen_streams.cycle_answer LANGUAGE plpgsql AS $$
DECLARE
    v_c         record;
    v_committed bigint;
BEGIN
    SELECT c.committed, c.lease_id, c.lease_expires_at INTO v_c FROM queen.cursors c
     WHERE c.partition_id = r.partition_id AND c.consumer_group = r.consumer_group
       FOR UPDATE;
    IF NOT FOUND
       OR queen.ack_verdict(v_c.committed, v_c.committed, v_c.lease_id, v_c.lease_expires_at, 'completed', r.lease_id) <> 'apply'
       OR cardinality(r.expect_keys) > 0 AND EXISTS (SELECT FROM queen_streams.cycle_stale(r)) THEN
        RETURN;
    END IF;
    UPDATE queen.cursors c
       SET committed = greatest(c.committed, c.batch_end),
           (lease_id, lease_expires_at, retry_count) = (SELECT l.lease_id, l.lease_expires_at, l.retry_count
                                                          FROM queen.lease_release_v2(c.lease_id, c.lease_expires_at, c.retry_count, true, true) l),
           total_consumed = c.total_consumed + r.count, last_consumed_at = now()
     WHERE c.partition_id = r.partition_id AND c.consumer_group = r.consumer_group
    RETURNING c.committed INTO v_committed;
    PERFORM queen_streams.cycle_state(r);
    a.outcome := 'committed';
    a.ack_count := r.count;
    a.lease_released := true;
    a.announce := p_next_offset > v_committed;
    RETURN NEXT a;
END
$$;
