-- The id of a partition about to be created, placed beside p_near: on
-- Citus, p_new with its random half drawn again until the id falls in
-- p_near's shard, so that a cycle's sink partition lies with its source
-- partition and the cycle, delegated to that shard's worker, commits there
-- alone, not in two phases (CITUS.md). The first half, the UUIDv7's time
-- and version, is kept, and with it the ids' order in their indexes.
-- Otherwise, on PostgreSQL or without p_near, p_new.
CREATE OR REPLACE FUNCTION queen.partition_id_near(p_new uuid, p_near uuid) RETURNS uuid
LANGUAGE plpgsql AS $$
DECLARE
    v_shard bigint;
    v_id    uuid := p_new;
BEGIN
    IF p_near IS NULL OR NOT EXISTS (SELECT FROM pg_extension WHERE extname = 'citus') THEN
        RETURN p_new;
    END IF;
    -- Planned only here, on Citus: PostgreSQL has no such function.
    v_shard := get_shard_id_for_distribution_column('queen.partitions', p_near);
    -- One shard in citus.shard_count (32 by default) takes about as many
    -- draws; 1000 misses do not happen, and the id is then p_new's.
    FOR i IN 1..1000 LOOP
        IF get_shard_id_for_distribution_column('queen.partitions', v_id) = v_shard THEN
            RETURN v_id;
        END IF;
        v_id := encode(substr(uuid_send(p_new), 1, 8) || substr(uuid_send(gen_random_uuid()), 9, 8), 'hex')::uuid;
    END LOOP;
    RETURN p_new;
END
$$;
