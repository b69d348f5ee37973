-- queen.log_push and the per-segment allocator queen.log_push_one_v1 it
-- called became one function, queen.log_push_one_v1 over the arrays of a
-- whole request (one nested call and one statement less on every push and
-- cycle). Nothing was released with the two, so they go at once
-- (UPGRADING.md); IF EXISTS, since on a new database no function exists yet
-- when migrations run.
DROP FUNCTION IF EXISTS queen.log_push(uuid[], integer[], bytea[], bigint[], text[], timestamptz[], timestamptz[],
    integer[], text[], uuid[]);
DROP FUNCTION IF EXISTS queen.log_push_one_v1(uuid, integer, bytea, bigint, text[], timestamptz, timestamptz);
DELETE FROM public.regent_schema_functions WHERE name IN ('queen.log_push', 'queen.log_push_one_v1');
