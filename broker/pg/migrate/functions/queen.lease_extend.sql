-- Extends the live lease p_lease_id wherever the tenant holds it: each
-- (partition, group) holding it gets expires = max(expires, now +
-- p_seconds). held counts the holds found under their lock, expires_at is
-- the latest expiry set (NULL when every hold had expired).
-- The holds are found without a lock, then each is locked and extended by a
-- statement of its own, in key order: on Citus they may lie on several
-- shards, and no statement locks rows of several. A hold that changed
-- lease in between is not one any more.
CREATE OR REPLACE FUNCTION queen.lease_extend(p_tenant text, p_lease_id uuid, p_seconds integer,
                                              OUT held integer, OUT expires_at timestamptz)
LANGUAGE plpgsql AS $$
DECLARE
    v       record;
    v_until timestamptz;
BEGIN
    held := 0;
    FOR v IN SELECT c.partition_id, c.consumer_group
               FROM queen.cursors c
               JOIN queen.partitions p ON p.id = c.partition_id
               JOIN queen.queues q ON q.id = p.queue_id
              WHERE c.lease_id = p_lease_id AND q.tenant = p_tenant
              ORDER BY c.partition_id, c.consumer_group LOOP
        SELECT c.lease_expires_at INTO v_until FROM queen.cursors c
         WHERE c.partition_id = v.partition_id AND c.consumer_group = v.consumer_group AND c.lease_id = p_lease_id
           FOR UPDATE;
        CONTINUE WHEN NOT FOUND;
        held := held + 1;
        CONTINUE WHEN NOT queen.lease_live(v_until);
        v_until := greatest(v_until, now() + make_interval(secs => p_seconds));
        UPDATE queen.cursors c SET lease_expires_at = v_until
         WHERE c.partition_id = v.partition_id AND c.consumer_group = v.consumer_group;
        expires_at := greatest(expires_at, v_until);
    END LOOP;
END
$$;
