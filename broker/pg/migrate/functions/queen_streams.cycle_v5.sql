-- One POST /streams/v1/cycle, one call (broker/pg/db): its request is one
-- queen_streams.cycle_request and its answer queen_streams.cycle_answer
-- rows, whose meaning queen_streams.cycle_rules gives. The cycle is a
-- family of functions named by their role, in the order they run:
--   - queen_streams.cycle_gate: the ownership verdicts and the (query,
--     partition) lock (queen_streams.cycle_owner), then the reset
--     generation;
--   - the sink pushes (queen.log_push_one_v1, the allocator): they write
--     nothing when a sink partition is gone or holds some of the client
--     transaction ids, and those rows are then the answer (a refusal that
--     follows takes the pushes back with the rest of the transaction);
--   - queen_streams.cycle_short, the common ack in one statement;
--   - queen_streams.cycle_rules, every other cycle, and one the short path
--     did not finish.
CREATE OR REPLACE FUNCTION queen_streams.cycle_v5(r queen_streams.cycle_request)
RETURNS SETOF queen_streams.cycle_answer LANGUAGE plpgsql AS $$
DECLARE
    a       queen_streams.cycle_answer;
    v_next  bigint;
    v_push  record;
    v_other boolean := false;
BEGIN
    SELECT g.queue_id, g.queue_name, g.next_offset INTO a.queue_id, a.queue_name, v_next
      FROM queen_streams.cycle_gate(r) g;
    a.base_offsets := '{}';
    IF cardinality(r.seg_partitions) > 0 THEN
        FOR v_push IN
            SELECT * FROM queen.log_push_one_v1(
                p_partitions => r.seg_partitions, p_frames => r.seg_frames, p_bodies => r.seg_bodies,
                p_checksums => r.seg_checksums, p_txids => r.seg_txids, p_min_at => r.seg_min_at,
                p_max_at => r.seg_max_at, p_dedups => r.seg_dedups, p_dedup_txids => r.dedup_txids,
                p_dedup_msg_ids => r.dedup_msg_ids)
        LOOP
            IF v_push.outcome = 'stored' THEN
                a.base_offsets := a.base_offsets || v_push.base_offset;
            ELSE
                v_other := true;
                RETURN NEXT ROW(v_push.outcome, NULL, NULL, NULL, NULL, NULL, NULL, v_push.partition_id,
                                v_push.dup_txids, v_push.dup_message_ids)::queen_streams.cycle_answer;
            END IF;
        END LOOP;
        IF v_other THEN
            RETURN;
        END IF;
    END IF;
    IF r.ack AND r.ack_ok AND r.release AND r.count IS NOT NULL AND r.lease_id IS NOT NULL THEN
        RETURN QUERY SELECT * FROM queen_streams.cycle_short(r, a, v_next);
        IF FOUND THEN
            RETURN;
        END IF;
    END IF;
    RETURN QUERY SELECT * FROM queen_streams.cycle_rules(r, a, v_next);
END
$$;
