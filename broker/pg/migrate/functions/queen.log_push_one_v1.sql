-- The allocator, and the one way into the log: /api/v1/push, a
-- transaction's push and the streams cycle's sink pushes all call it, once
-- per request, and it alone moves partitions' next_offset and stores
-- segments (already packed by the broker). The segments come as parallel
-- arrays, one element per segment, one segment per partition, sorted by
-- partition id (the lock order that keeps concurrent pushes to the same
-- partitions from deadlocking); the per-frame transaction ids and the dedup
-- ids are flattened, segment after segment (p_frames and p_dedups say how
-- many belong to each). p_dedup_txids are the client-supplied transaction
-- ids among the frames (ids the broker made are unique by construction and
-- are not recorded), distinct within each partition.
--
-- First each partition is locked by moving its next_offset past its
-- segment, which gives the segment its base offset. When a partition no
-- longer exists ('gone': deleted behind the broker's cache) or already
-- holds some of the client transaction ids within its queue's dedup window
-- ('duplicates', with dup_txids and the message ids they were stored
-- under), the moves are taken back
-- (the locks are still held: nobody allocated since), those rows are the
-- answer and nothing is written; the broker resolves again or repacks
-- without them, and calls again. Otherwise the segments are stored, and the
-- answer is a 'stored' row per segment, in order, with its base offset and
-- its partition's queue (which the broker announces once the transaction
-- has committed). A one-partition request, the common one, costs three
-- statements: the move, the dedup insert and the segment insert. The move
-- also keeps the partition's stored_bytes, which the tenant quota's
-- maxStoredBytes is checked against.
CREATE OR REPLACE FUNCTION queen.log_push_one_v1(
    p_partitions    uuid[],
    p_frames        integer[],
    p_bodies        bytea[],
    p_checksums     bigint[],
    p_txids         text[],
    p_min_at        timestamptz[],
    p_max_at        timestamptz[],
    p_dedups        integer[],
    p_dedup_txids   text[],
    p_dedup_msg_ids uuid[]
) RETURNS TABLE (
    partition_id    uuid,
    outcome         text,
    base_offset     bigint,
    queue_id        uuid,
    dup_txids       text[],
    dup_message_ids uuid[]
) LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_bases      bigint[] := '{}';
    v_queues     uuid[] := '{}';
    v_base       bigint;
    v_queue      uuid;
    v_at         timestamptz;
    v_gone       uuid;
    v_dedup_pids uuid[] := '{}';
    v_since      timestamptz[];      -- by partition: its dedup window's start
    v_dedup_since timestamptz[] := '{}';
    v_t          integer := 0;
    v_expired_gone boolean := false;
BEGIN
    FOR i IN 1 .. cardinality(p_partitions) LOOP
        v_at := p_max_at[i]; -- Citus 13.2.2 crashes deparsing SET col = param[i] (CITUS.md)
        UPDATE queen.partitions p
           SET next_offset = p.next_offset + p_frames[i],
               last_push_at = v_at,
               stored_bytes = p.stored_bytes + octet_length(p_bodies[i])
         WHERE p.id = p_partitions[i]
        RETURNING p.next_offset - p_frames[i], p.queue_id INTO v_base, v_queue;
        IF NOT FOUND THEN
            PERFORM queen.log_push_undo(p_partitions => p_partitions[1 : i - 1], p_frames => p_frames[1 : i - 1],
                                        p_bodies => p_bodies[1 : i - 1]);
            -- A statement per partition: Citus plans no sub-select over
            -- the partitions correlated to the rows of an unnest.
            FOREACH v_gone IN ARRAY p_partitions LOOP
                CONTINUE WHEN EXISTS (SELECT FROM queen.partitions p WHERE p.id = v_gone);
                partition_id := v_gone;
                outcome := 'gone';
                RETURN NEXT;
            END LOOP;
            RETURN;
        END IF;
        v_bases[i] := v_base;
        v_queues[i] := v_queue;
    END LOOP;
    IF cardinality(p_dedup_txids) > 0 THEN
        FOR i IN 1 .. cardinality(p_partitions) LOOP
            v_dedup_pids := v_dedup_pids || array_fill(p_partitions[i], ARRAY[p_dedups[i]]);
        END LOOP;
        -- Recording the ids is the check: the primary key's unique check
        -- probes the index once per id, whatever the planner thinks of the
        -- table. A plain INSERT, in a block whose subtransaction takes the
        -- rows back when one is refused, cost a third less than ON CONFLICT
        -- DO NOTHING, whose speculative insertion doubles each row's work.
        LOOP
        BEGIN
            INSERT INTO queen.push_dedup (partition_id, transaction_id, message_id)
            SELECT * FROM unnest(v_dedup_pids, p_dedup_txids, p_dedup_msg_ids);
            EXIT;
        EXCEPTION WHEN unique_violation OR internal_error THEN
            -- Citus reports a unique violation of a row it wrote on a worker
            -- as internal_error with PostgreSQL's message; any other error
            -- goes on.
            IF SQLSTATE = 'XX000' AND SQLERRM NOT LIKE 'duplicate key value violates unique constraint "push_dedup_pkey%' THEN
                RAISE;
            END IF;
            -- Some were recorded before. The rows just recorded are gone
            -- with the block. A record older than its queue's dedup window
            -- (its dedupWindowSeconds, else the broker's --dedup-window,
            -- which the connection carries) is forgotten and the insert
            -- tried again: the sweep removes such rows only now and then.
            -- Only a conflict pays for this; a push without one reads no
            -- window.
            -- The window's start is found per partition first, from its
            -- queue: Citus plans no join of the records with the catalog
            -- in a DELETE (CITUS.md).
            IF NOT v_expired_gone THEN
                v_expired_gone := true;
                SELECT array_agg(now() - make_interval(secs => coalesce(q.dedup_window_seconds,
                           nullif(current_setting('regent.dedup_window_seconds', true), '')::integer, 3600)) ORDER BY g.i)
                  INTO v_since
                  FROM unnest(v_queues) WITH ORDINALITY AS g (qid, i) JOIN queen.queues q ON q.id = g.qid;
                FOR i IN 1 .. cardinality(p_partitions) LOOP
                    v_dedup_since := v_dedup_since || array_fill(v_since[i], ARRAY[p_dedups[i]]);
                END LOOP;
                DELETE FROM queen.push_dedup x
                 USING unnest(v_dedup_pids, p_dedup_txids, v_dedup_since) AS u (pid, txid, since)
                 WHERE x.partition_id = u.pid AND x.transaction_id = u.txid AND x.created_at <= u.since;
                IF FOUND THEN
                    CONTINUE;
                END IF;
            END IF;
            -- The others are duplicates: take the moves back too, so that
            -- nothing is written, and answer them, looked up one by one.
            PERFORM queen.log_push_undo(p_partitions => p_partitions, p_frames => p_frames, p_bodies => p_bodies);
            RETURN QUERY SELECT u.pid, 'duplicates'::text, NULL::bigint, NULL::uuid,
                                array_agg(u.txid), array_agg(d.message_id)
                           FROM unnest(v_dedup_pids, p_dedup_txids) AS u (pid, txid)
                          CROSS JOIN LATERAL (SELECT x.message_id FROM queen.push_dedup x
                                               WHERE x.partition_id = u.pid AND x.transaction_id = u.txid) d
                          GROUP BY u.pid;
            IF NOT FOUND THEN
                -- Only an id repeated within a partition of the request,
                -- which the broker never sends, conflicts with none left.
                RAISE EXCEPTION 'a client transaction id is repeated within a partition of the request'
                    USING ERRCODE = 'internal_error';
            END IF;
            RETURN;
        END;
        END LOOP;
    END IF;

    FOR i IN 1 .. cardinality(p_partitions) LOOP
        INSERT INTO queen.log_segments
            (partition_id, base_offset, frame_count, body, checksum, txids, min_created_at, max_created_at)
        VALUES
            (p_partitions[i], v_bases[i], p_frames[i], p_bodies[i], p_checksums[i],
             p_txids[v_t + 1 : v_t + p_frames[i]], p_min_at[i], p_max_at[i]);
        partition_id := p_partitions[i];
        outcome := 'stored';
        base_offset := v_bases[i];
        queue_id := v_queues[i];
        RETURN NEXT;
        v_t := v_t + p_frames[i];
    END LOOP;
END
$$;
