-- TODO header
CREATE OR REPLACE FUNCTION queen.ack_cursor(
    p_tenant       text,
    p_partition_id uuid,
    p_group        text,
    p_lease_id     uuid,
    p_txids        text[]
) RETURNS TABLE (
    queue_id       uuid,
    queue_name     text,
    partition_name text,
    offsets        bigint[],
    committed      bigint,
    batch_end      bigint,
    lease_held     boolean,
    lease_ok       boolean,
    announce       boolean
) LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    c       queen.cursors%ROWTYPE;
    v_next  bigint;
    v_after bigint;
BEGIN
    SELECT q.id, q.name, p.name, p.next_offset INTO queue_id, queue_name, partition_name, v_next
      FROM queen.partitions p JOIN queen.queues q ON q.id = p.queue_id
     WHERE p.id = p_partition_id AND q.tenant = p_tenant;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    SELECT * INTO c FROM queen.cursors x
     WHERE x.partition_id = p_partition_id AND x.consumer_group = p_group
       FOR UPDATE;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    committed := c.committed;
    batch_end := c.batch_end;
    lease_held := c.lease_id IS NOT NULL;
    lease_ok := p_lease_id = '00000000-0000-0000-0000-000000000000'
                OR COALESCE(p_lease_id = c.lease_id AND c.lease_expires_at > now(), false);
    announce := false;
    IF c.batch_end IS NOT NULL THEN
        offsets := queen.txid_offsets(p_partition_id, c.batch_start, c.batch_end, p_txids);
    END IF;
    IF lease_held AND lease_ok THEN
        SELECT max(o) + 1 INTO v_after FROM unnest(offsets) AS o;
        IF v_after > c.committed THEN
            UPDATE queen.cursors x
               SET committed = v_after, total_consumed = x.total_consumed + (v_after - c.committed),
                   retry_count = 0, last_consumed_at = now(),
                   lease_id = CASE WHEN v_after >= c.batch_end THEN NULL ELSE x.lease_id END,
                   lease_expires_at = CASE WHEN v_after >= c.batch_end THEN NULL ELSE x.lease_expires_at END
             WHERE x.partition_id = p_partition_id AND x.consumer_group = p_group;
            announce := v_after >= c.batch_end AND v_after < v_next;
        END IF;
    END IF;
    RETURN NEXT;
END
$$;
ALTER FUNCTION queen.ack_cursor SET plan_cache_mode = force_generic_plan;
