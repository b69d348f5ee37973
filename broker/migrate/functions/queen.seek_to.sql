-- Replaced by queen.seek_to_v2, which also seeks to the end and one
-- partition; kept for one release, for the brokers of the previous release
-- (migrate.Previous). The same seek, through the one rule.
CREATE OR REPLACE FUNCTION queen.seek_to(p_tenant text, p_queue text, p_group text, p_at timestamptz)
RETURNS TABLE (queue_id uuid, partition_id uuid) LANGUAGE sql AS $$
    SELECT m.queue_id, m.partition_id
      FROM queen.seek_to_v2(p_tenant => p_tenant, p_queue => p_queue, p_group => p_group, p_partition => NULL, p_at => p_at) m
$$;
