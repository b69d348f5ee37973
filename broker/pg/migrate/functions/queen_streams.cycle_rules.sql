-- The rules of one POST /streams/v1/cycle, which runs in one transaction:
-- the state ops, the sink pushes and the source ack land together or not
-- at all (the seed, streams-routes.md). queen_streams.cycle_v5 calls it
-- once queen_streams.cycle_gate has given the ownership verdicts (with the
-- source partition's queue and next_offset, passed here) and checked the
-- reset generation, for every cycle that queen_streams.cycle_short did not
-- finish. The request (queen_streams.cycle_request) says how the state ops
-- and sink segments arrive. Segments come sorted by partition id: that is
-- the lock order that keeps two cycles feeding the same sinks from
-- deadlocking.
--
-- The answer is rows, whose outcome is:
--   'committed' (one row): everything applied; base_offsets per segment,
--     ack_count and lease_released for the ack, and announce when the
--     released source partition still holds data to deliver (the broker
--     announces it, and the sink partitions, after the commit);
--   'duplicates' (a row per sink partition): client transaction ids the
--     partition already holds (dup_txids, stored as dup_message_ids);
--     nothing was written, and the broker repacks without them and calls
--     again;
--   'gone' (a row per sink partition): deleted behind the broker's cache;
--     nothing was written, and the broker resolves again.
-- A refusal (the query or the source partition is not the caller's, the
-- lease is not the live lease, a state row changed since the worker read
-- it by its if_updated_at, the new state rows would exceed the tenant's
-- maxStateRows) raises, and rolls back everything. So does a deferred idle
-- flush (rules 2, 3 and 5 below), whose DETAIL is
-- 'streams.flush_deferred.<reason>': the broker answers it as a success
-- that applied nothing, since the windows stay in the state and the next
-- flush, or the fold that closes them, emits them once.
--
-- # Exactly-once beside an idle flush
--
-- A worker may run its idle flush (an ack-less cycle that emits and deletes
-- the windows it read as ripe) beside its folds (pop, read state, cycle
-- with the ack), on one partition, in one process or several. Stock Queen
-- streams workers do, and their emits carry no transaction id, so the sink
-- cannot catch a window emitted twice. Each rule below closes one
-- interleaving that counted an event twice or split a window
-- (test/flushrace reproduces them):
--
--   1. Every cycle of one query and partition runs alone: cycle_owner (in
--      the gate) takes an advisory lock until the commit, so each rule below is checked
--      against the state and cursor that the cycle then writes over.
--   2. An idle flush is deferred while a worker holds a live lease on the
--      partition for the cycle's consumer group. A fold holds its lease
--      from its pop to its cycle, and reads state in between: a flush
--      committed in that span would emit a window that the fold then emits
--      or rewrites again. The flush holds the cursor row's lock from this
--      check to its commit, so no pop can claim the partition, and no fold
--      read its state, in between.
--   3. An idle flush is deferred while the partition holds messages the
--      group has not acknowledged: it is not idle. A window it closed now
--      would miss the events waiting for it, and the fold that brings them
--      would open the window again (a split) or drop them as late.
--   4. A state op may name the updated_at it read (expect_keys, expect_at): the cycle is
--      refused when that row has since changed or gone; the worker asked to
--      be told. The broker also expects, of an idle flush, that each row it
--      deletes without one still exists (expect_at NULL), and defers the
--      flush when one is gone: a flush that read a window before a fold
--      closed it would otherwise emit it again after the fold, once rules
--      2 and 3 no longer hold.
--   5. An idle flush is deferred when a row it deletes without an
--      updated_at has changed since a ripe read last returned it
--      (ripe_read_at, written by queen_streams.state_ripe_read): a flush
--      that read a window as ripe before a fold added an event to it would
--      emit the window without the event and delete it. Stock workers read
--      ripe windows, emit them and delete them, with no memory between two
--      flushes, so a deferred flush costs them nothing. The rule knows the
--      last ripe read, not the flush's own: it is exact while one worker
--      flushes a partition, and a second flusher's read of the new value
--      can let the first one's stale flush through; a flush that read
--      without ripe_at_or_before (the stock session-window flush) is not
--      seen. Only the updated_at the worker sends closes those (the README
--      says so).
--
-- The lease check is queen.ack_verdict's, asked as for a 'completed' ack of
-- the message at the cursor: whatever its status, the ack needs the live
-- lease it names. Every release is queen.lease_release_v2's.
--
-- What the ack does to the cursor:
--   status ok, release: committed jumps to batch_end, the lease and the
--     retry state are cleared, total_consumed grows by the count;
--   status ok, not release: the gate partial ack, below;
--   status not ok: the lease is released and the cursor stays, so the
--     batch redelivers; the count is 0;
--   no ack (ack false): an idle flush, no lease work at all.
CREATE OR REPLACE FUNCTION queen_streams.cycle_rules(r queen_streams.cycle_request, a queen_streams.cycle_answer,
                                                     p_next_offset bigint)
RETURNS SETOF queen_streams.cycle_answer LANGUAGE plpgsql AS $$
DECLARE
    v_cursor queen.cursors%ROWTYPE;
    v_walk   record;
    v_stale    text;
    v_implicit boolean;  -- v_stale carries no if_updated_at: an idle flush's delete
    v_gone     boolean;
BEGIN
    -- The exactly-once guard. The ack locks the cursor row and checks the
    -- lease here (cycle_short checks the common ack's in the UPDATE that
    -- applies it). Either way the row is locked from the check to the
    -- commit, so no pop can take the lease in between, and a refusal rolls
    -- back everything the cycle did.
    IF r.ack AND r.lease_id IS NULL THEN
        RAISE EXCEPTION 'invalid lease: the ack carries no leaseId';
    END IF;
    IF r.ack THEN
        SELECT * INTO v_cursor FROM queen.cursors c
         WHERE c.partition_id = r.partition_id AND c.consumer_group = r.consumer_group
           FOR UPDATE;
        IF queen.ack_verdict(v_cursor.committed, v_cursor.committed, v_cursor.lease_id, v_cursor.lease_expires_at,
                             'completed', r.lease_id) <> 'apply' THEN
            PERFORM queen_streams.refuse_lease(r.partition_id, r.consumer_group, r.lease_id);
        END IF;
    END IF;

    -- Rules 4 and 5: the rows the worker read are still as it read them.
    -- A precondition the worker sent is checked first: its failure is a
    -- refusal, whatever else would defer the flush.
    IF cardinality(r.expect_keys) > 0 THEN
        SELECT st.key, st.implicit, st.gone INTO v_stale, v_implicit, v_gone
          FROM queen_streams.cycle_stale(r) st;
        IF FOUND AND NOT v_implicit THEN
            RAISE EXCEPTION 'stale state: key % changed or was deleted since it was read', to_json(v_stale);
        END IF;
    END IF;

    -- Rules 2 and 3: an idle flush needs an idle partition. A group that
    -- never popped it has no fold to race. The cursor row stays locked
    -- until the commit, so that no pop claims the partition (pops skip a
    -- locked cursor) and no fold reads the state the flush is changing.
    IF NOT r.ack THEN
        SELECT * INTO v_cursor FROM queen.cursors c
         WHERE c.partition_id = r.partition_id AND c.consumer_group = r.consumer_group
           FOR UPDATE;
        IF FOUND AND v_cursor.lease_id IS NOT NULL AND queen.lease_live(v_cursor.lease_expires_at) THEN
            RAISE EXCEPTION 'a worker holds a live lease on this partition for consumer group %', r.consumer_group
                USING DETAIL = 'streams.flush_deferred.leased';
        END IF;
        -- next_offset read again under the cursor's lock: a push that
        -- committed since cycle_owner read it waits for the group too.
        IF FOUND AND (SELECT pa.next_offset FROM queen.partitions pa WHERE pa.id = r.partition_id) > v_cursor.committed THEN
            RAISE EXCEPTION 'the partition holds messages consumer group % has not acknowledged', r.consumer_group
                USING DETAIL = 'streams.flush_deferred.unacknowledged';
        END IF;
    END IF;
    IF v_gone THEN
        RAISE EXCEPTION 'key % that the flush deletes is already gone', to_json(v_stale)
            USING DETAIL = 'streams.flush_deferred.gone';
    ELSIF v_implicit THEN
        RAISE EXCEPTION 'key % changed since a ripe read returned it', to_json(v_stale)
            USING DETAIL = 'streams.flush_deferred.changed';
    END IF;

    -- The sink pushes are done (cycle_v5), and the state goes before the
    -- ack.
    PERFORM queen_streams.cycle_state(r);

    a.lease_released := false;
    a.announce := false;
    IF NOT r.ack THEN
        -- no lease work
    ELSIF NOT r.ack_ok THEN
        -- A nack: the whole batch redelivers.
        UPDATE queen.cursors c
           SET (lease_id, lease_expires_at) = (SELECT l.lease_id, l.lease_expires_at
                                                 FROM queen.lease_release_v2(c.lease_id, c.lease_expires_at, c.retry_count, true, false) l)
         WHERE c.partition_id = r.partition_id AND c.consumer_group = r.consumer_group;
        a.ack_count := 0;
        a.lease_released := true;
    ELSIF r.release THEN
        -- The whole leased batch, of the count the worker names or else of
        -- its frames.
        a.ack_count := r.count;
        IF a.ack_count IS NULL THEN
            SELECT w.walked INTO a.ack_count
              FROM queen_streams.walk_frames(r.partition_id, v_cursor.committed, v_cursor.batch_end,
                                                v_cursor.batch_end - v_cursor.committed) w;
        END IF;
        UPDATE queen.cursors c
           SET committed = greatest(c.committed, c.batch_end),
               (lease_id, lease_expires_at, retry_count) = (SELECT l.lease_id, l.lease_expires_at, l.retry_count
                                                              FROM queen.lease_release_v2(c.lease_id, c.lease_expires_at, c.retry_count, true, true) l),
               total_consumed = c.total_consumed + a.ack_count, last_consumed_at = now()
         WHERE c.partition_id = r.partition_id AND c.consumer_group = r.consumer_group;
        v_cursor.committed := greatest(v_cursor.committed, v_cursor.batch_end);
        a.lease_released := true;
    ELSE
        -- The gate partial ack: committed advances by exactly r.count frames
        -- (the whole batch without a count), walked over the real segments
        -- so that offsets retention removed are skipped; the lease is kept.
        SELECT * INTO v_walk
          FROM queen_streams.walk_frames(r.partition_id, v_cursor.committed, v_cursor.batch_end,
                                            coalesce(r.count, v_cursor.batch_end - v_cursor.committed));
        a.ack_count := v_walk.walked;
        UPDATE queen.cursors c
           SET committed = v_walk.next_offset, total_consumed = c.total_consumed + a.ack_count,
               last_consumed_at = now()
         WHERE c.partition_id = r.partition_id AND c.consumer_group = r.consumer_group;
    END IF;
    a.announce := a.lease_released AND p_next_offset > v_cursor.committed;
    IF NOT r.ack THEN
        -- A pop that found the cursor locked by this flush skipped the
        -- partition: a message pushed meanwhile waits for an announcement.
        SELECT pa.next_offset > v_cursor.committed INTO a.announce
          FROM queen.partitions pa WHERE pa.id = r.partition_id;
        a.announce := coalesce(a.announce, false);
    END IF;
    a.outcome := 'committed';
    RETURN NEXT a;
END
$$;
