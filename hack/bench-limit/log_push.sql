-- Not a limit: the SQL of one push request of B=100 as the broker makes it,
-- one call of queen.log_push_one_v1, every item with a fresh client transactionId
-- (UUIDv7 text, as Queen's JavaScript client stamps on every message), so
-- that the cost of dedup shows beside push.sql's least SQL.
-- Client k works on partition k (mod :partitions), as in push.sql.
\set p :client_id % :partitions + 1
WITH ids AS (
    SELECT array_agg(substr(h, 1, 8) || '-' || substr(h, 9, 4) || '-7' || substr(r, 1, 3) || '-8' || substr(r, 4, 3) || '-' || substr(r, 7, 12) ORDER BY g) AS t,
           array_agg((h || '7' || substr(r, 1, 3) || '8' || substr(r, 4, 15))::uuid ORDER BY g) AS m
      FROM generate_series(1, 100) g,
           LATERAL (SELECT lpad(to_hex((extract(epoch FROM clock_timestamp()) * 1000)::bigint), 12, '0') AS h,
                           md5(random()::text || g) AS r) x)
SELECT count(*) FILTER (WHERE l.outcome = 'stored') AS stored
  FROM ids, queen.log_push_one_v1(ARRAY[('00000000-0000-0000-0000-' || lpad(:p::text, 12, '0'))::uuid], ARRAY[100],
                                  ARRAY[:body::bytea], ARRAY[42::bigint], ids.t, ARRAY[now()], ARRAY[now()],
                                  ARRAY[100], ids.t, ids.m) l
\gset
-- A push that was not stored fails the run.
\if :stored != 1
SELECT 'a push was not stored'::int;
\endif
