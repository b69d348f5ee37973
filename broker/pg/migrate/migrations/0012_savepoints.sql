-- Savepoints (issue 27): a consistent copy of a query's state rows and of
-- its consumer group's cursors, with the config hash and the pipeline that
-- folded them, taken and restored by queen_streams.savepoint_take and
-- savepoint_restore, each in one transaction. A savepoint belongs to its
-- query and goes with it.
CREATE TABLE queen_streams.savepoints (
    query_id       uuid NOT NULL REFERENCES queen_streams.queries (id) ON DELETE CASCADE,
    name           text NOT NULL,
    consumer_group text NOT NULL,
    config_hash    text NOT NULL,
    -- The pipeline as its owner serialised it (the operator writes JSON);
    -- NULL for a query whose workers are not the operator's.
    pipeline       text,
    state_rows     bigint NOT NULL,
    cursors        integer NOT NULL,
    taken_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (query_id, name)
);

CREATE TABLE queen_streams.savepoint_state (
    query_id     uuid NOT NULL,
    name         text NOT NULL,
    partition_id uuid NOT NULL,
    key          text COLLATE "C" NOT NULL,
    value        jsonb NOT NULL,
    updated_at   timestamptz NOT NULL,
    FOREIGN KEY (query_id, name) REFERENCES queen_streams.savepoints (query_id, name) ON DELETE CASCADE
);
-- No primary key: the rows come from queen_streams.state, whose key they
-- keep, and are only ever read or dropped a savepoint at a time.
CREATE INDEX savepoint_state_of ON queen_streams.savepoint_state (query_id, name);

-- The group's position on each source partition it had reached. Only the
-- position: a restore releases the lease, as a seek does, and the
-- counters (total_consumed) keep counting what was delivered.
CREATE TABLE queen_streams.savepoint_cursors (
    query_id     uuid NOT NULL,
    name         text NOT NULL,
    partition_id uuid NOT NULL,
    committed    bigint NOT NULL,
    PRIMARY KEY (query_id, name, partition_id),
    FOREIGN KEY (query_id, name) REFERENCES queen_streams.savepoints (query_id, name) ON DELETE CASCADE
);

-- The fence of a restore, as rewind_token is the fence of a rewind: the
-- token of the last restore, written in its transaction, so that an
-- operator that dies before recording it does not restore twice (a second
-- restore after the workers ran would emit their windows again).
ALTER TABLE queen_streams.queries
    ADD COLUMN restore_token     text,
    ADD COLUMN restored_at       timestamptz,
    ADD COLUMN restored_from     text;
