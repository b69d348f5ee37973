-- A cycle that carries the source partition's next batch: one POST
-- /streams/v1/cycle whose request names next_batch (Regent's worker; stock
-- clients never send it), in one transaction and one call (broker/pg/db). It
-- runs queen_streams.cycle_v7 on r and its table rows unchanged, and once
-- that committed, pops the same partition for the same consumer group with
-- queen.pop_v2, under p_lease_id, a lease id the broker made for it.
--
-- The broker asks for it only with a success ack of the whole batch
-- (release_lease true), so the cycle has released the lease and moved the
-- cursor to the batch's end, and holds the cursor row locked until the
-- commit (cycle_short's UPDATE, or cycle_rules' FOR UPDATE): no other pop
-- can claim the partition in between, and no idle flush can run, since
-- it is deferred while a lease is live and the new one is. So the worker
-- keeps the partition, and the state that the cycle wrote is still the
-- partition's state when its next cycle, under p_lease_id, commits: what
-- lets it hold the state in memory instead of reading it again. The lease
-- is a new one, not the acked batch's: a retry of this very cycle whose
-- answer was lost names the old lease and is refused, as after any
-- committed cycle, instead of acking a batch the worker never saw.
--
-- Rows: the cycle's own rows (queen_streams.cycle_answer's columns) when
-- it did not commit ('duplicates', 'gone': nothing was written, nothing is
-- popped); otherwise queen.pop's rows for the partition ('segment' rows,
-- then 'claimed', or 'busy' or 'empty'), then the cycle's 'committed' row,
-- whose lease_released and announce are false when the pop claimed the
-- partition, and whose state_at is the updated_at of every state row the
-- cycle wrote (now(), as queen_streams.cycle_state writes it).
--
-- p_shard is cycle_v7's: the source partition, on Citus the distribution
-- argument (a cycle with table rows comes through queen_streams.cycle_next).
CREATE OR REPLACE FUNCTION queen_streams.cycle_next_v2(
    p_shard      uuid,
    r            queen_streams.cycle_request,
    p_table_rows jsonb,
    p_lease_id   uuid,
    p_batch      integer,
    p_max_bytes  bigint
) RETURNS TABLE (
    outcome         text,
    queue_id        uuid,
    queue_name      text,
    base_offsets    bigint[],
    ack_count       bigint,
    lease_released  boolean,
    announce        boolean,
    partition_id    uuid,
    dup_txids       text[],
    dup_message_ids uuid[],
    state_at        timestamptz,
    partition_name  text,
    retry_at        timestamptz,
    batch_start     bigint,
    batch_end       bigint,
    base_offset     bigint,
    frame_count     integer,
    body            bytea,
    checksum        bigint
) LANGUAGE plpgsql AS $$
DECLARE
    a      queen_streams.cycle_answer;
    v_done queen_streams.cycle_answer;
    v_pop  record;
    -- queen.pop_v2 turns synchronous_commit off for the rest of the
    -- transaction (a lost pop only redelivers); a cycle's commit must not
    -- be lost, so the setting is put back after it.
    v_sync text := current_setting('synchronous_commit');
BEGIN
    FOR a IN SELECT * FROM queen_streams.cycle_v7(p_shard, r, p_table_rows) LOOP
        IF a.outcome = 'committed' THEN
            v_done := a;
        ELSE
            RETURN QUERY SELECT a.*, NULL::timestamptz, NULL::text, NULL::timestamptz, NULL::bigint, NULL::bigint,
                                NULL::bigint, NULL::integer, NULL::bytea, NULL::bigint;
        END IF;
    END LOOP;
    IF v_done.outcome IS NULL THEN
        RETURN;
    END IF;
    FOR v_pop IN
        SELECT * FROM queen.pop_v2(p_shard => r.partition_id, p_tenant => r.tenant, p_queue_id => v_done.queue_id, p_candidates => ARRAY[r.partition_id],
                                p_group => r.consumer_group, p_partitions => 1, p_batch => p_batch,
                                p_lease_id => p_lease_id, p_sub_start => 'all', p_max_bytes => p_max_bytes)
    LOOP
        IF v_pop.outcome = 'claimed' THEN
            v_done.lease_released := false;
            v_done.announce := false;
        END IF;
        -- Out through the output columns, which nothing above has set
        -- (NULL), and RETURN NEXT: assignments, where a RETURN QUERY runs
        -- a statement a row.
        outcome := v_pop.outcome;
        partition_id := v_pop.partition_id;
        partition_name := v_pop.partition_name;
        retry_at := v_pop.retry_at;
        batch_start := v_pop.batch_start;
        batch_end := v_pop.batch_end;
        base_offset := v_pop.base_offset;
        frame_count := v_pop.frame_count;
        body := v_pop.body;
        checksum := v_pop.checksum;
        RETURN NEXT;
    END LOOP;
    v_sync := set_config('synchronous_commit', v_sync, true);
    RETURN QUERY SELECT v_done.*, now(), NULL::text, NULL::timestamptz, NULL::bigint, NULL::bigint, NULL::bigint,
                        NULL::integer, NULL::bytea, NULL::bigint;
END
$$;
