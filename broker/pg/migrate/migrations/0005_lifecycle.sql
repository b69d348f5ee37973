-- The StreamQuery lifecycle (issue 18): suspend and the one-shot rewind.
--
-- suspended is set by the operator (queen_streams.query_suspend) from
-- spec.suspend. While it is true, queen.pop answers nothing to the query's
-- consumer group (streams.<name>) and queen_streams.cycle_owner refuses the
-- query's cycles; the cursors stay where they are. It is not part of the
-- config hash: registration never reads or writes it.
--
-- rewind_token is the streams.regent.dev/rewind-to annotation value of the
-- last rewind (queen_streams.query_rewind), written in the rewind's own
-- transaction: it is what makes a rewind happen once per value, whatever
-- the operator survives. rewound_at, rewind_to and rewind_partitions
-- describe that rewind, for an operator that must record it after the
-- fact.
ALTER TABLE queen_streams.queries
    ADD COLUMN suspended         boolean NOT NULL DEFAULT false,
    ADD COLUMN rewind_token      text,
    ADD COLUMN rewound_at        timestamptz,
    ADD COLUMN rewind_to         timestamptz,
    ADD COLUMN rewind_partitions integer;
