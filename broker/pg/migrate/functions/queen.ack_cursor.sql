-- The common case of queen.ack_v2, set-based: a consumer acknowledging what it
-- popped, all 'completed', on one cursor, under one lease (p_lease_id NULL
-- for none). It answers as queen.ack_v2 does on the same state, in the same
-- columns (dlq is always false), by the same verdict (queen.ack_verdict):
-- a message behind the cursor is already acknowledged; otherwise the lease
-- must be held (and, when given, be the cursor's live lease), and the cursor
-- moves just past the message; reaching the end of the batch releases the
-- lease (queen.lease_release_v2), and announce asks the broker to announce a
-- release that left data to deliver.
-- Doing this item by item in PL/pgSQL cost the database twice as much as the
-- rest of the ack. The cursor's lock, then the offsets, the move and the answers;
-- the offsets are read through queen.txid_offset_rows, whose plan is cached
-- (queen.txid_offsets as a SQL function was parsed and planned again at
-- every ack: a third of its cost).
CREATE OR REPLACE FUNCTION queen.ack_cursor(
    p_tenant       text,
    p_partition_id uuid,
    p_group        text,
    p_lease_id     uuid,
    p_txids        text[]
) RETURNS TABLE (
    item           integer,
    queue_id       uuid,
    success        boolean,
    error          text,
    queue_name     text,
    partition_name text,
    lease_released boolean,
    dlq            boolean,
    announce       boolean
) LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_qid       uuid;
    v_qname     text;
    v_pname     text;
    v_next      bigint;
    v_committed bigint;
    v_start     bigint;
    v_end       bigint;
    v_lease     uuid;
    v_expires   timestamptz;
    v_held      boolean;
    v_moves     boolean;
    v_offs      bigint[];
    v_after     bigint; -- where the cursor moved, NULL when it stayed
BEGIN
    -- No partition of the tenant, or no cursor: no row, and every item is
    -- 'Message not found', as without a batch.
    SELECT q.id, q.name, p.name, p.next_offset, x.committed, x.batch_start, x.batch_end, x.lease_id,
           x.lease_expires_at
      INTO v_qid, v_qname, v_pname, v_next, v_committed, v_start, v_end, v_lease, v_expires
      FROM queen.partitions p
      JOIN queen.queues q ON q.id = p.queue_id
      JOIN queen.cursors x ON x.partition_id = p.id AND x.consumer_group = p_group
     WHERE p.id = p_partition_id AND q.tenant = p_tenant
       FOR UPDATE OF x;
    v_held := v_lease IS NOT NULL;
    -- An ack of the message at the cursor would apply.
    v_moves := queen.ack_verdict(v_committed, v_committed, v_lease, v_expires, 'completed', p_lease_id) = 'apply';
    -- The offsets (none without a batch), then the cursor's move, then the
    -- answers. Under the lease every message found succeeds, and the cursor
    -- reaches just past the furthest one so far; without it only those
    -- behind the cursor do, and the cursor stays. Separate statements, each
    -- on one table or none: Citus cannot plan a data-modifying CTE beside a
    -- function's rows (CITUS.md).
    SELECT array_agg(t.off ORDER BY t.i) INTO v_offs
      FROM queen.txid_offset_rows(p_partition_id, v_start, v_end, p_txids) t;
    v_after := (SELECT max(o) + 1 FROM unnest(v_offs) o);
    IF v_moves AND v_after > v_committed THEN
        UPDATE queen.cursors x
           SET committed = v_after, total_consumed = x.total_consumed + (v_after - x.committed),
               retry_count = 0, last_consumed_at = now(),
               (lease_id, lease_expires_at) = (SELECT r.lease_id, r.lease_expires_at
                                                 FROM queen.lease_release_v2(x.lease_id, x.lease_expires_at, x.retry_count,
                                                                             v_after >= x.batch_end, true) r)
         WHERE x.partition_id = p_partition_id AND x.consumer_group = p_group;
    ELSE
        v_after := NULL;
    END IF;
    RETURN QUERY
    SELECT u.i::integer,
           CASE WHEN u.off IS NOT NULL THEN v_qid END,
           u.ok,
           CASE WHEN NOT u.ok THEN u.verdict END,
           CASE WHEN u.off IS NOT NULL THEN v_qname END,
           CASE WHEN u.off IS NOT NULL THEN v_pname END,
           r.released,
           false,
           r.released AND coalesce(v_after >= v_end AND v_after < v_next, false)
      FROM (SELECT o.i, o.off, v.verdict, v.verdict IN ('done', 'apply') AS ok,
                   CASE WHEN v_moves THEN greatest(v_committed, max(o.off) OVER (ORDER BY o.i) + 1)
                        ELSE v_committed END AS reach
              FROM unnest(v_offs) WITH ORDINALITY AS o (off, i)
             CROSS JOIN LATERAL (SELECT queen.ack_verdict(o.off, v_committed, v_lease, v_expires,
                                                          'completed', p_lease_id) AS verdict) v) u
     CROSS JOIN LATERAL (SELECT u.ok AND (NOT v_held OR u.reach >= v_end) AS released) r
     ORDER BY u.i;
END
$$;
ALTER FUNCTION queen.ack_cursor SET plan_cache_mode = force_generic_plan;
