-- Resolves (tenant, queue, partition) to ids and the queue options the
-- broker keeps in memory. With p_create, a missing queue (default options)
-- or partition is created with the ids the broker made (UUIDv7), and
-- concurrent creators converge on one row. Returns no row when p_create is
-- false and either is missing. A new queue of a tenant passes the maxQueues
-- gate first (queen.queue_admit), which raises a refusal when the tenant is
-- at its cap. Succeeds queen.resolve_partition, which had no gate.
CREATE OR REPLACE FUNCTION queen.resolve_partition_v2(
    p_tenant           text,
    p_queue            text,
    p_partition        text,
    p_create           boolean,
    p_new_queue_id     uuid,
    p_new_partition_id uuid,
    OUT queue_id           uuid,
    OUT partition_id       uuid,
    OUT lease_time         integer,
    OUT retry_limit        integer,
    OUT delayed_processing integer,
    OUT encryption_enabled boolean
) RETURNS SETOF record LANGUAGE plpgsql AS $$
BEGIN
    SELECT q.id, q.lease_time, q.retry_limit, q.delayed_processing, q.encryption_enabled
      INTO queue_id, lease_time, retry_limit, delayed_processing, encryption_enabled
      FROM queen.queues q WHERE q.tenant = p_tenant AND q.name = p_queue;
    IF NOT FOUND THEN
        IF NOT p_create THEN
            RETURN;
        END IF;
        PERFORM queen.queue_admit(p_tenant => p_tenant, p_queue => p_queue);
        -- ON CONFLICT waits for a concurrent creator; the next statement
        -- then sees its row.
        INSERT INTO queen.queues (id, tenant, name) VALUES (p_new_queue_id, p_tenant, p_queue)
        ON CONFLICT (tenant, name) DO NOTHING;
        SELECT q.id, q.lease_time, q.retry_limit, q.delayed_processing, q.encryption_enabled
          INTO queue_id, lease_time, retry_limit, delayed_processing, encryption_enabled
          FROM queen.queues q WHERE q.tenant = p_tenant AND q.name = p_queue;
    END IF;
    SELECT p.id INTO partition_id FROM queen.partitions p
     WHERE p.queue_id = resolve_partition_v2.queue_id AND p.name = p_partition;
    IF NOT FOUND THEN
        IF NOT p_create THEN
            RETURN;
        END IF;
        -- Creators of one queue's partitions take turns on the queue's row,
        -- and the name is looked up again under it: on Citus, whose tables
        -- are distributed by partition id, no unique index can hold the name
        -- (CITUS.md). NO KEY UPDATE leaves the foreign keys' checks free.
        PERFORM FROM queen.queues q WHERE q.id = resolve_partition_v2.queue_id FOR NO KEY UPDATE;
        SELECT p.id INTO partition_id FROM queen.partitions p
         WHERE p.queue_id = resolve_partition_v2.queue_id AND p.name = p_partition;
        IF NOT FOUND THEN
            INSERT INTO queen.partitions (id, queue_id, name)
            VALUES (p_new_partition_id, resolve_partition_v2.queue_id, p_partition);
            partition_id := p_new_partition_id;
        END IF;
    END IF;
    RETURN NEXT;
END
$$;
