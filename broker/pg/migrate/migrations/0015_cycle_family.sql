-- The cycle's request and answer as types of their own, so that every
-- function of the cycle takes one argument and answers one row type, and
-- a new version of one names them instead of repeating two dozen
-- parameters. A field comes after the ones before it, as broker/db passes
-- them (ROW(...)::queen_streams.cycle_request).
--
-- The request: the state ops folded to their effect (each key once, in
-- upsert_keys or delete_keys; the rows the worker read in expect_keys,
-- with the updated_at it read, or NULL: the row must exist); the sink
-- segments packed as parallel arrays, one element per segment, sorted by
-- partition id, their per-frame transaction ids and dedup ids flattened
-- (seg_frames and seg_dedups say how many belong to each); the source ack
-- (ack false: an idle flush); and the reset generation the worker
-- registered under (NULL checks nothing).
CREATE TYPE queen_streams.cycle_request AS (
    tenant         text,
    query_id       uuid,
    partition_id   uuid,
    consumer_group text,
    upsert_keys    text[],
    upsert_values  jsonb[],
    delete_keys    text[],
    expect_keys    text[],
    expect_at      timestamptz[],
    seg_partitions uuid[],
    seg_frames     integer[],
    seg_bodies     bytea[],
    seg_checksums  bigint[],
    seg_txids      text[],
    seg_min_at     timestamptz[],
    seg_max_at     timestamptz[],
    seg_dedups     integer[],
    dedup_txids    text[],
    dedup_msg_ids  uuid[],
    ack            boolean,
    lease_id       uuid,
    ack_ok         boolean,
    count          bigint,
    release        boolean,
    generation     bigint
);

-- The answer: its outcome is 'committed' (one row), 'duplicates' or
-- 'gone' (a row per sink partition); queen_streams.cycle_rules says what
-- each means.
CREATE TYPE queen_streams.cycle_answer AS (
    outcome         text,
    queue_id        uuid,
    queue_name      text,
    base_offsets    bigint[],
    ack_count       bigint,
    lease_released  boolean,
    announce        boolean,
    partition_id    uuid,
    dup_txids       text[],
    dup_message_ids uuid[]
);

-- queen_streams.cycle was kept from the release before the previous one,
-- which alone called it. cycle_v2 and cycle_v3 were called by no broker,
-- only by cycle_v4, whose body (kept one release, for the previous
-- release's brokers) now calls queen_streams.cycle_v5. IF EXISTS: on a new
-- database no function exists yet when migrations run.
DROP FUNCTION IF EXISTS queen_streams.cycle(text, uuid, uuid, text, text[], jsonb[], text[], uuid[], integer[],
    bytea[], bigint[], text[], timestamptz[], timestamptz[], integer[], text[], uuid[], boolean, uuid, boolean,
    bigint, boolean);
DROP FUNCTION IF EXISTS queen_streams.cycle_v3(text, uuid, uuid, text, text[], jsonb[], text[], text[],
    timestamptz[], uuid[], integer[], bytea[], bigint[], text[], timestamptz[], timestamptz[], integer[], text[],
    uuid[], boolean, uuid, boolean, bigint, boolean, bigint);
DROP FUNCTION IF EXISTS queen_streams.cycle_v2(text, uuid, uuid, text, text[], jsonb[], text[], text[],
    timestamptz[], uuid[], integer[], bytea[], bigint[], text[], timestamptz[], timestamptz[], integer[], text[],
    uuid[], boolean, uuid, boolean, bigint, boolean);
DELETE FROM public.regent_schema_functions
 WHERE name IN ('queen_streams.cycle', 'queen_streams.cycle_v2', 'queen_streams.cycle_v3');
