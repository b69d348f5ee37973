-- Streaming queries, their state shards, and the tenant quota grants.

CREATE TABLE queen_streams.queries (
    id           uuid PRIMARY KEY,
    tenant       text NOT NULL DEFAULT 'default',
    name         text NOT NULL,
    source_queue text NOT NULL,
    sink_queue   text,
    config_hash  text NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now(),
    UNIQUE (tenant, name)
);

-- One shard per (query, source partition). Keys are opaque strings compared
-- bytewise ("C"), so ORDER BY key is stable across locales and a key_prefix
-- read is a range scan of the primary key.
CREATE TABLE queen_streams.state (
    query_id     uuid NOT NULL REFERENCES queen_streams.queries (id) ON DELETE CASCADE,
    partition_id uuid NOT NULL,
    key          text COLLATE "C" NOT NULL,
    value        jsonb NOT NULL,
    updated_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (query_id, partition_id, key)
);

-- Grants for non-default tenants to register new query names. max_queries
-- NULL means no cap.
CREATE TABLE queen_streams.quota (
    tenant      text PRIMARY KEY,
    enabled     boolean NOT NULL DEFAULT true,
    max_queries integer CHECK (max_queries >= 0),
    updated_at  timestamptz NOT NULL DEFAULT now()
);
