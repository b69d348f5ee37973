-- Tenant quotas that protect neighbours (issue 18): the limits a TenantQuota
-- grants beyond max_queries, the counters their checks read, the token
-- budgets that replicas lease push and pop rates from, and what the brokers
-- record for the operator's status. Every new limit is NULL by default, which
-- means no limit.

ALTER TABLE queen_streams.quota
    ADD COLUMN max_queues               integer CHECK (max_queues >= 0),
    ADD COLUMN push_messages_per_second bigint  CHECK (push_messages_per_second > 0),
    ADD COLUMN push_messages_burst      bigint  CHECK (push_messages_burst >= push_messages_per_second),
    ADD COLUMN push_bytes_per_second    bigint  CHECK (push_bytes_per_second > 0),
    ADD COLUMN push_bytes_burst         bigint  CHECK (push_bytes_burst >= push_bytes_per_second),
    ADD COLUMN pop_messages_per_second  bigint  CHECK (pop_messages_per_second > 0),
    ADD COLUMN max_stored_bytes         bigint  CHECK (max_stored_bytes >= 0),
    ADD COLUMN max_state_rows           bigint  CHECK (max_state_rows >= 0);

-- The compressed segment bytes a partition holds: queen.log_push_one_v1 adds
-- each segment's body under the partition's lock it already takes, and
-- retention subtracts what it deletes, so a tenant's stored bytes are a sum
-- over its partitions, never a scan of the log.
ALTER TABLE queen.partitions ADD COLUMN stored_bytes bigint NOT NULL DEFAULT 0;
UPDATE queen.partitions p SET stored_bytes = s.bytes
  FROM (SELECT partition_id, sum(octet_length(body)) AS bytes FROM queen.log_segments GROUP BY partition_id) s
 WHERE p.id = s.partition_id;

-- The state rows of each shard (query, source partition), kept by the cycle
-- in the transaction that changes them. One row per shard, so cycles of
-- different partitions never wait on each other's counter.
CREATE TABLE queen_streams.state_rows (
    query_id     uuid NOT NULL REFERENCES queen_streams.queries (id) ON DELETE CASCADE,
    partition_id uuid NOT NULL,
    row_count    bigint NOT NULL,
    PRIMARY KEY (query_id, partition_id)
);
INSERT INTO queen_streams.state_rows (query_id, partition_id, row_count)
SELECT query_id, partition_id, count(*) FROM queen_streams.state GROUP BY query_id, partition_id;

-- The shared token buckets of the rate limits, one per tenant and kind
-- ('push_messages', 'push_bytes', 'pop_messages'). Replicas lease tokens
-- from them in small slices (queen_streams.quota_lease), so that together
-- they never exceed the rate.
CREATE TABLE queen_streams.quota_budget (
    tenant      text NOT NULL REFERENCES queen_streams.quota (tenant) ON DELETE CASCADE,
    kind        text NOT NULL,
    tokens      double precision NOT NULL,
    refilled_at timestamptz NOT NULL,
    PRIMARY KEY (tenant, kind)
);

-- What the brokers pushed and popped for each quota'd tenant, in 10-second
-- buckets added to by every replica once a second; the operator reads the
-- last minute of them.
CREATE TABLE queen_streams.quota_meter (
    tenant text NOT NULL REFERENCES queen_streams.quota (tenant) ON DELETE CASCADE,
    bucket timestamptz NOT NULL,
    pushed bigint NOT NULL DEFAULT 0,
    popped bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant, bucket)
);

-- When each limit last refused the tenant, written by a broker at most once
-- a second per limit: the operator's QuotaExceeded condition reads it.
CREATE TABLE queen_streams.quota_refusals (
    tenant     text NOT NULL REFERENCES queen_streams.quota (tenant) ON DELETE CASCADE,
    quota      text NOT NULL,
    refused_at timestamptz NOT NULL,
    PRIMARY KEY (tenant, quota)
);
