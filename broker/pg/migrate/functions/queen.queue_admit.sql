-- The maxQueues gate, called in the transaction that is about to create the
-- tenant's queue p_queue (queen.resolve_partition_v2, and the configure
-- route before its insert). The quota row's lock serialises every new queue
-- of a limited tenant until the creating transaction commits, so the cap is
-- exact under racing creates, as max_queries is for registrations. An
-- existing queue always passes; the default tenant and a tenant without
-- maxQueues take no lock. A refusal raises (the broker answers 429).
CREATE OR REPLACE FUNCTION queen.queue_admit(p_tenant text, p_queue text)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    v_max   integer;
    v_count bigint;
BEGIN
    IF p_tenant = 'default' THEN
        RETURN;
    END IF;
    SELECT g.max_queues INTO v_max FROM queen_streams.quota g
     WHERE g.tenant = p_tenant AND g.max_queues IS NOT NULL
       FOR UPDATE;
    IF NOT FOUND OR EXISTS (SELECT FROM queen.queues q WHERE q.tenant = p_tenant AND q.name = p_queue) THEN
        RETURN;
    END IF;
    SELECT count(*) INTO v_count FROM queen.queues q WHERE q.tenant = p_tenant;
    IF v_count >= v_max THEN
        RAISE EXCEPTION 'quota maxQueues: tenant % has reached its cap of % queues', p_tenant, v_max
            USING DETAIL = 'quota.maxQueues';
    END IF;
END
$$;
