-- queen.log_push records the client transaction ids and moves each
-- partition's allocator itself, once per request: the per-segment allocator
-- it called checked the same ids a second time, under the same locks.
-- IF EXISTS: on a new database, migrations run before any function exists.
DROP FUNCTION IF EXISTS queen.log_push_one_v1(uuid, integer, bytea, bigint, text[], timestamptz, timestamptz, text[], uuid[]);
DELETE FROM public.regent_schema_functions WHERE name = 'queen.log_push_one_v1';
