-- Records a trace, with its names, against the tenant's message p_txid of
-- partition p_partition_id, and answers whether the message was found (no
-- partition of the tenant, or no such message: nothing is written). The
-- consumer that traces a message usually holds it in its group's current
-- batch, so the message's offset is looked for among that batch's segments
-- first (queen.txid_offset_rows); only a message outside it costs a walk
-- over every segment of the partition.
-- Every row it reads and writes is the partition's: on Citus the function
-- is distributed by p_partition_id and a call is one command to the
-- partition's worker (CITUS.md), as the hot calls are, since a consumer may
-- trace every message it handles.
CREATE OR REPLACE FUNCTION queen.trace_add(p_partition_id uuid, p_tenant text, p_txid text, p_id uuid, p_group text,
                                           p_event_type text, p_data jsonb, p_worker text, p_names text[])
RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    v_next  bigint;
    v_start bigint;
    v_end   bigint;
    v_off   bigint;
BEGIN
    SELECT p.next_offset INTO v_next
      FROM queen.partitions p JOIN queen.queues q ON q.id = p.queue_id AND q.tenant = p_tenant
     WHERE p.id = p_partition_id;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    SELECT c.batch_start, c.batch_end INTO v_start, v_end
      FROM queen.cursors c
     WHERE c.partition_id = p_partition_id AND c.consumer_group = p_group AND c.batch_end IS NOT NULL;
    IF v_end IS NOT NULL THEN
        SELECT r.off INTO v_off FROM queen.txid_offset_rows(p_partition_id, v_start, v_end, ARRAY[p_txid]) r;
    END IF;
    IF v_off IS NULL THEN
        SELECT r.off INTO v_off FROM queen.txid_offset_rows(p_partition_id, 0, v_next, ARRAY[p_txid]) r;
    END IF;
    IF v_off IS NULL THEN
        RETURN false;
    END IF;
    INSERT INTO queen.traces (id, partition_id, transaction_id, message_offset, consumer_group, event_type, data, worker_id)
    VALUES (p_id, p_partition_id, p_txid, v_off, p_group, p_event_type, p_data, p_worker);
    INSERT INTO queen.trace_names (tenant, name, partition_id, trace_id)
    SELECT p_tenant, n, p_partition_id, p_id FROM unnest(p_names) n;
    RETURN true;
END
$$;
