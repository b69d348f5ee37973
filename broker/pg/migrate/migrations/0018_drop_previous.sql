-- The functions the release before the previous one called, kept one
-- release for its brokers (UPGRADING.md): the previous release calls
-- their successors queen_streams.cycle_v5, queen.seek_to_v2 and
-- queen_streams.register_v2. IF EXISTS: on a new database migrations run
-- before any function exists.
DROP FUNCTION IF EXISTS queen_streams.cycle_v4(text, uuid, uuid, text, text[], jsonb[], text[], text[],
    timestamptz[], uuid[], integer[], bytea[], bigint[], text[], timestamptz[], timestamptz[], integer[], text[],
    uuid[], boolean, uuid, boolean, bigint, boolean, bigint);
DROP FUNCTION IF EXISTS queen.seek_to(text, text, text, timestamptz);
DROP FUNCTION IF EXISTS queen_streams.register(text, text, text, text, text, boolean, uuid);
DELETE FROM public.regent_schema_functions
 WHERE name IN ('queen_streams.cycle_v4', 'queen.seek_to', 'queen_streams.register');
