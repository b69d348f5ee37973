-- One POST /streams/v1/cycle in one transaction: the state ops, the sink
-- pushes and the source ack land together or not at all (the seed,
-- streams-routes.md). The broker calls it with named arguments.
--
-- The state ops arrive folded by the broker to their effect: the keys to
-- upsert with their values and the keys to delete, no key twice. The sink
-- segments arrive packed, as parallel arrays with one element per segment;
-- the per-frame transaction ids and the dedup ids are flattened, segment
-- after segment (p_seg_frames and p_seg_dedups say how many belong to
-- each). Segments come sorted by partition id: that is the lock order that
-- keeps two cycles feeding the same sinks from deadlocking.
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
--   1. Every cycle of one query and partition runs alone: cycle_owner takes
--      an advisory lock until the commit, so each rule below is checked
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
--   4. A state op may name the updated_at it read (p_expect_*): the cycle is
--      refused when that row has since changed or gone; the worker asked to
--      be told. The broker also expects, of an idle flush, that each row it
--      deletes without one still exists (p_expect_at NULL), and defers the
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
-- lease it names. Every release is queen.lease_release's.
--
-- What the ack does to the cursor:
--   status ok, p_release: committed jumps to batch_end, the lease and the
--     retry state are cleared, total_consumed grows by the count;
--   status ok, not p_release: the gate partial ack, below;
--   status not ok: the lease is released and the cursor stays, so the
--     batch redelivers; the count is 0;
--   no ack (p_ack false): an idle flush, no lease work at all.
CREATE OR REPLACE FUNCTION queen_streams.cycle_v2(
    p_tenant         text,
    p_query_id       uuid,
    p_partition_id   uuid,
    p_group          text,
    p_upsert_keys    text[],
    p_upsert_values  jsonb[],
    p_delete_keys    text[],
    p_expect_keys    text[],
    p_expect_at      timestamptz[],
    p_seg_partitions uuid[],
    p_seg_frames     integer[],
    p_seg_bodies     bytea[],
    p_seg_checksums  bigint[],
    p_seg_txids      text[],
    p_seg_min_at     timestamptz[],
    p_seg_max_at     timestamptz[],
    p_seg_dedups     integer[],
    p_dedup_txids    text[],
    p_dedup_msg_ids  uuid[],
    p_ack            boolean,
    p_lease_id       uuid,
    p_ack_ok         boolean,
    p_count          bigint,
    p_release        boolean
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
    dup_message_ids uuid[]
) LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_cursor queen.cursors%ROWTYPE;
    -- The common ack: a success status, the lease released, a count.
    v_one    boolean := p_ack AND p_ack_ok AND p_release AND p_count IS NOT NULL;
    v_next   bigint;
    v_push   record;
    v_walk   record;
    v_refused boolean := false;
    v_inserted bigint := 0;
    v_deleted  bigint := 0;
    v_stale    text;
    v_implicit boolean;  -- v_stale carries no if_updated_at: an idle flush's delete
    v_gone     boolean;
BEGIN
    SELECT o.queue_id, o.queue_name, o.next_offset INTO queue_id, queue_name, v_next
      FROM queen_streams.cycle_owner(p_tenant, p_query_id, p_partition_id) o;

    -- The exactly-once guard. The common ack checks the lease in the UPDATE
    -- that applies it, at the end; every other ack locks the cursor row
    -- here, since its work reads the row. Either way the row is locked from
    -- the check to the commit, so no pop can take the lease in between, and
    -- a refusal rolls back everything the cycle did.
    IF p_ack AND p_lease_id IS NULL THEN
        RAISE EXCEPTION 'invalid lease: the ack carries no leaseId';
    END IF;
    IF p_ack AND NOT v_one THEN
        SELECT * INTO v_cursor FROM queen.cursors c
         WHERE c.partition_id = p_partition_id AND c.consumer_group = p_group
           FOR UPDATE;
        IF queen.ack_verdict(v_cursor.committed, v_cursor.committed, v_cursor.lease_id, v_cursor.lease_expires_at,
                             'completed', p_lease_id) <> 'apply' THEN
            PERFORM queen_streams.refuse_lease(p_partition_id, p_group, p_lease_id);
        END IF;
    END IF;

    -- Rules 4 and 5: the rows the worker read are still as it read them.
    -- A precondition the worker sent is checked first: its failure is a
    -- refusal, whatever else would defer the flush.
    IF cardinality(p_expect_keys) > 0 THEN
        SELECT e.key, e.at IS NULL, s.key IS NULL INTO v_stale, v_implicit, v_gone
          FROM unnest(p_expect_keys, p_expect_at) AS e (key, at)
          LEFT JOIN queen_streams.state s
            ON s.query_id = p_query_id AND s.partition_id = p_partition_id AND s.key = e.key
         WHERE s.key IS NULL OR s.updated_at <> coalesce(e.at, s.ripe_read_at)
         ORDER BY e.at IS NULL
         LIMIT 1;
        IF FOUND AND NOT v_implicit THEN
            RAISE EXCEPTION 'stale state: key % changed or was deleted since it was read', to_json(v_stale);
        END IF;
    END IF;

    -- Rules 2 and 3: an idle flush needs an idle partition. A group that
    -- never popped it has no fold to race. The cursor row stays locked
    -- until the commit, so that no pop claims the partition (pops skip a
    -- locked cursor) and no fold reads the state the flush is changing.
    IF NOT p_ack THEN
        SELECT * INTO v_cursor FROM queen.cursors c
         WHERE c.partition_id = p_partition_id AND c.consumer_group = p_group
           FOR UPDATE;
        IF FOUND AND v_cursor.lease_id IS NOT NULL AND queen.lease_live(v_cursor.lease_expires_at) THEN
            RAISE EXCEPTION 'a worker holds a live lease on this partition for consumer group %', p_group
                USING DETAIL = 'streams.flush_deferred.leased';
        END IF;
        -- next_offset read again under the cursor's lock: a push that
        -- committed since cycle_owner read it waits for the group too.
        IF FOUND AND (SELECT pa.next_offset FROM queen.partitions pa WHERE pa.id = p_partition_id) > v_cursor.committed THEN
            RAISE EXCEPTION 'the partition holds messages consumer group % has not acknowledged', p_group
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

    -- The sink pushes go first: they write nothing when a sink partition
    -- is gone or holds some of the client transaction ids, and those rows
    -- are then the answer.
    base_offsets := '{}';
    IF cardinality(p_seg_partitions) > 0 THEN
        FOR v_push IN
            SELECT * FROM queen.log_push_one_v1(
                p_partitions => p_seg_partitions, p_frames => p_seg_frames, p_bodies => p_seg_bodies,
                p_checksums => p_seg_checksums, p_txids => p_seg_txids, p_min_at => p_seg_min_at,
                p_max_at => p_seg_max_at, p_dedups => p_seg_dedups, p_dedup_txids => p_dedup_txids,
                p_dedup_msg_ids => p_dedup_msg_ids)
        LOOP
            IF v_push.outcome = 'stored' THEN
                base_offsets := base_offsets || v_push.base_offset;
            ELSE
                v_refused := true;
                RETURN QUERY SELECT v_push.outcome, NULL::uuid, NULL::text, NULL::bigint[], NULL::bigint,
                                    NULL::boolean, NULL::boolean, v_push.partition_id, v_push.dup_txids,
                                    v_push.dup_message_ids;
            END IF;
        END LOOP;
        IF v_refused THEN
            RETURN;
        END IF;
    END IF;

    IF cardinality(p_delete_keys) > 0 THEN
        DELETE FROM queen_streams.state s
         WHERE s.query_id = p_query_id AND s.partition_id = p_partition_id AND s.key = ANY (p_delete_keys);
        GET DIAGNOSTICS v_deleted = ROW_COUNT;
    END IF;
    IF cardinality(p_upsert_keys) > 0 THEN
        -- xmax is 0 on the rows the upsert inserted, not on those it updated.
        WITH up AS (
            INSERT INTO queen_streams.state AS s (query_id, partition_id, key, value, updated_at)
            SELECT p_query_id, p_partition_id, u.key, u.value, now()
              FROM unnest(p_upsert_keys, p_upsert_values) AS u (key, value)
            ON CONFLICT (query_id, partition_id, key)
            DO UPDATE SET value = EXCLUDED.value, updated_at = EXCLUDED.updated_at
            RETURNING s.xmax = 0 AS inserted)
        SELECT count(*) FILTER (WHERE up.inserted) INTO v_inserted FROM up;
    END IF;
    -- The shard's row count, which the tenant quota's maxStateRows is
    -- checked against, changes only when keys come or go: a fold that
    -- rewrites its keys does no counter work.
    IF v_inserted <> v_deleted THEN
        PERFORM queen_streams.state_rows_add(p_tenant => p_tenant, p_query_id => p_query_id,
                                             p_partition_id => p_partition_id, p_delta => v_inserted - v_deleted);
    END IF;

    lease_released := false;
    announce := false;
    IF NOT p_ack THEN
        -- no lease work
    ELSIF v_one THEN
        UPDATE queen.cursors c
           SET committed = greatest(c.committed, c.batch_end),
               (lease_id, lease_expires_at, retry_count) = (SELECT r.lease_id, r.lease_expires_at, r.retry_count
                                                              FROM queen.lease_release(c, true, true) r),
               total_consumed = c.total_consumed + p_count, last_consumed_at = now()
         WHERE c.partition_id = p_partition_id AND c.consumer_group = p_group
           AND queen.ack_verdict(c.committed, c.committed, c.lease_id, c.lease_expires_at, 'completed', p_lease_id) = 'apply'
        RETURNING c.committed INTO v_cursor.committed;
        IF NOT FOUND THEN
            PERFORM queen_streams.refuse_lease(p_partition_id, p_group, p_lease_id);
        END IF;
        ack_count := p_count;
        lease_released := true;
    ELSIF NOT p_ack_ok THEN
        -- A nack: the whole batch redelivers.
        UPDATE queen.cursors c
           SET (lease_id, lease_expires_at) = (SELECT r.lease_id, r.lease_expires_at
                                                 FROM queen.lease_release(c, true, false) r)
         WHERE c.partition_id = p_partition_id AND c.consumer_group = p_group;
        ack_count := 0;
        lease_released := true;
    ELSIF p_release THEN
        -- No count: the whole leased batch.
        SELECT w.walked INTO ack_count
          FROM queen_streams.walk_frames(p_partition_id, v_cursor.committed, v_cursor.batch_end,
                                            v_cursor.batch_end - v_cursor.committed) w;
        UPDATE queen.cursors c
           SET committed = greatest(c.committed, c.batch_end),
               (lease_id, lease_expires_at, retry_count) = (SELECT r.lease_id, r.lease_expires_at, r.retry_count
                                                              FROM queen.lease_release(c, true, true) r),
               total_consumed = c.total_consumed + ack_count, last_consumed_at = now()
         WHERE c.partition_id = p_partition_id AND c.consumer_group = p_group;
        v_cursor.committed := greatest(v_cursor.committed, v_cursor.batch_end);
        lease_released := true;
    ELSE
        -- The gate partial ack: committed advances by exactly p_count frames
        -- (the whole batch without a count), walked over the real segments
        -- so that offsets retention removed are skipped; the lease is kept.
        SELECT * INTO v_walk
          FROM queen_streams.walk_frames(p_partition_id, v_cursor.committed, v_cursor.batch_end,
                                            coalesce(p_count, v_cursor.batch_end - v_cursor.committed));
        ack_count := v_walk.walked;
        UPDATE queen.cursors c
           SET committed = v_walk.next_offset, total_consumed = c.total_consumed + ack_count,
               last_consumed_at = now()
         WHERE c.partition_id = p_partition_id AND c.consumer_group = p_group;
    END IF;
    announce := lease_released AND v_next > v_cursor.committed;
    IF NOT p_ack THEN
        -- A pop that found the cursor locked by this flush skipped the
        -- partition: a message pushed meanwhile waits for an announcement.
        SELECT pa.next_offset > v_cursor.committed INTO announce
          FROM queen.partitions pa WHERE pa.id = p_partition_id;
        announce := coalesce(announce, false);
    END IF;
    outcome := 'committed';
    RETURN NEXT;
END
$$;
