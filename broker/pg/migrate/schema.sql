--
-- Name: queen; Type: SCHEMA; Schema: -; Owner: -
--

CREATE SCHEMA queen;

--
-- Name: queen_streams; Type: SCHEMA; Schema: -; Owner: -
--

CREATE SCHEMA queen_streams;

--
-- Name: cycle_answer; Type: TYPE; Schema: queen_streams; Owner: -
--

CREATE TYPE queen_streams.cycle_answer AS (
	outcome text,
	queue_id uuid,
	queue_name text,
	base_offsets bigint[],
	ack_count bigint,
	lease_released boolean,
	announce boolean,
	partition_id uuid,
	dup_txids text[],
	dup_message_ids uuid[]
);

--
-- Name: cycle_request; Type: TYPE; Schema: queen_streams; Owner: -
--

CREATE TYPE queen_streams.cycle_request AS (
	tenant text,
	query_id uuid,
	partition_id uuid,
	consumer_group text,
	upsert_keys text[],
	upsert_values jsonb[],
	delete_keys text[],
	expect_keys text[],
	expect_at timestamp with time zone[],
	seg_partitions uuid[],
	seg_frames integer[],
	seg_bodies bytea[],
	seg_checksums bigint[],
	seg_txids text[],
	seg_min_at timestamp with time zone[],
	seg_max_at timestamp with time zone[],
	seg_dedups integer[],
	dedup_txids text[],
	dedup_msg_ids uuid[],
	ack boolean,
	lease_id uuid,
	ack_ok boolean,
	count bigint,
	release boolean,
	generation bigint
);

--
-- Name: ack(text, uuid[], text[], text[], text[], uuid[], text[], integer[], uuid[], bytea[], bigint[], timestamp with time zone[]); Type: FUNCTION; Schema: queen; Owner: -
--

CREATE FUNCTION queen.ack(p_tenant text, p_partition_ids uuid[], p_groups text[], p_txids text[], p_statuses text[], p_lease_ids uuid[], p_errors text[], p_dlq_items integer[], p_dlq_message_ids uuid[], p_dlq_payloads bytea[], p_dlq_key_ids bigint[], p_dlq_created timestamp with time zone[]) RETURNS TABLE(item integer, queue_id uuid, success boolean, error text, queue_name text, partition_name text, lease_released boolean, dlq boolean, announce boolean, frame_offset bigint, segment_base bigint, segment_frames integer, segment_body bytea, segment_checksum bigint)
    LANGUAGE plpgsql
    AS $$ -- the body of functions/queen.ack.sql
$$;

--
-- Name: ack_cursor(text, uuid, text, uuid, text[]); Type: FUNCTION; Schema: queen; Owner: -
--

CREATE FUNCTION queen.ack_cursor(p_tenant text, p_partition_id uuid, p_group text, p_lease_id uuid, p_txids text[]) RETURNS TABLE(item integer, queue_id uuid, success boolean, error text, queue_name text, partition_name text, lease_released boolean, dlq boolean, announce boolean)
    LANGUAGE plpgsql
    SET plan_cache_mode TO 'force_generic_plan'
    AS $$ -- the body of functions/queen.ack_cursor.sql
$$;

--
-- Name: ack_v2(uuid, text, uuid[], text[], text[], text[], uuid[], text[], integer[], uuid[], bytea[], bigint[], timestamp with time zone[]); Type: FUNCTION; Schema: queen; Owner: -
--

CREATE FUNCTION queen.ack_v2(p_shard uuid, p_tenant text, p_partition_ids uuid[], p_groups text[], p_txids text[], p_statuses text[], p_lease_ids uuid[], p_errors text[], p_dlq_items integer[], p_dlq_message_ids uuid[], p_dlq_payloads bytea[], p_dlq_key_ids bigint[], p_dlq_created timestamp with time zone[]) RETURNS TABLE(item integer, queue_id uuid, success boolean, error text, queue_name text, partition_name text, lease_released boolean, dlq boolean, announce boolean, frame_offset bigint, segment_base bigint, segment_frames integer, segment_body bytea, segment_checksum bigint)
    LANGUAGE plpgsql
    SET plan_cache_mode TO 'force_generic_plan'
    AS $$ -- the body of functions/queen.ack_v2.sql
$$;

--
-- Name: ack_verdict(bigint, bigint, uuid, timestamp with time zone, text, uuid); Type: FUNCTION; Schema: queen; Owner: -
--

CREATE FUNCTION queen.ack_verdict(p_offset bigint, p_committed bigint, p_lease_id uuid, p_expires_at timestamp with time zone, p_status text, p_given uuid) RETURNS text
    LANGUAGE sql STABLE
    AS $$ -- the body of functions/queen.ack_verdict.sql
$$;

--
-- Name: drop_below_floors(uuid, integer); Type: FUNCTION; Schema: queen; Owner: -
--

CREATE FUNCTION queen.drop_below_floors(p_queue_id uuid, p_chunk integer) RETURNS integer
    LANGUAGE plpgsql
    AS $$ -- the body of functions/queen.drop_below_floors.sql
$$;

--
-- Name: drop_below_floors_v2(uuid, uuid[], integer); Type: FUNCTION; Schema: queen; Owner: -
--

CREATE FUNCTION queen.drop_below_floors_v2(p_shard uuid, p_partitions uuid[], p_chunk integer) RETURNS integer
    LANGUAGE plpgsql
    AS $$ -- the body of functions/queen.drop_below_floors_v2.sql
$$;

--
-- Name: floors_to_raise(uuid, integer, boolean); Type: FUNCTION; Schema: queen; Owner: -
--

CREATE FUNCTION queen.floors_to_raise(p_queue_id uuid, p_seconds integer, p_consumed boolean) RETURNS TABLE(shard uuid, partitions uuid[], floors bigint[])
    LANGUAGE plpgsql
    AS $$ -- the body of functions/queen.floors_to_raise.sql
$$;

--
-- Name: lease_extend(text, uuid, integer); Type: FUNCTION; Schema: queen; Owner: -
--

CREATE FUNCTION queen.lease_extend(p_tenant text, p_lease_id uuid, p_seconds integer, OUT held integer, OUT expires_at timestamp with time zone) RETURNS record
    LANGUAGE plpgsql
    AS $$ -- the body of functions/queen.lease_extend.sql
$$;

--
-- Name: lease_held_by(uuid, timestamp with time zone, uuid); Type: FUNCTION; Schema: queen; Owner: -
--

CREATE FUNCTION queen.lease_held_by(p_lease_id uuid, p_expires_at timestamp with time zone, p_given uuid) RETURNS boolean
    LANGUAGE sql STABLE
    AS $$ -- the body of functions/queen.lease_held_by.sql
$$;

--
-- Name: lease_live(timestamp with time zone); Type: FUNCTION; Schema: queen; Owner: -
--

CREATE FUNCTION queen.lease_live(p_expires_at timestamp with time zone) RETURNS boolean
    LANGUAGE sql STABLE
    AS $$ -- the body of functions/queen.lease_live.sql
$$;

--
-- Name: cursors; Type: TABLE; Schema: queen; Owner: -
--

CREATE TABLE queen.cursors (
    partition_id uuid NOT NULL,
    consumer_group text NOT NULL,
    committed bigint DEFAULT 0 NOT NULL,
    batch_start bigint,
    batch_end bigint,
    lease_id uuid,
    lease_expires_at timestamp with time zone,
    retry_count integer DEFAULT 0 NOT NULL,
    total_consumed bigint DEFAULT 0 NOT NULL,
    last_consumed_at timestamp with time zone
);

--
-- Name: lease_release(queen.cursors, boolean, boolean); Type: FUNCTION; Schema: queen; Owner: -
--

CREATE FUNCTION queen.lease_release(c queen.cursors, p_release boolean, p_batch_left boolean) RETURNS queen.cursors
    LANGUAGE plpgsql IMMUTABLE
    AS $$ -- the body of functions/queen.lease_release.sql
$$;

--
-- Name: lease_release_v2(uuid, timestamp with time zone, integer, boolean, boolean); Type: FUNCTION; Schema: queen; Owner: -
--

CREATE FUNCTION queen.lease_release_v2(p_lease_id uuid, p_expires_at timestamp with time zone, p_retry_count integer, p_release boolean, p_batch_left boolean, OUT lease_id uuid, OUT lease_expires_at timestamp with time zone, OUT retry_count integer) RETURNS record
    LANGUAGE plpgsql IMMUTABLE
    AS $$ -- the body of functions/queen.lease_release_v2.sql
$$;

--
-- Name: log_push_one_v1(uuid[], integer[], bytea[], bigint[], text[], timestamp with time zone[], timestamp with time zone[], integer[], text[], uuid[]); Type: FUNCTION; Schema: queen; Owner: -
--

CREATE FUNCTION queen.log_push_one_v1(p_partitions uuid[], p_frames integer[], p_bodies bytea[], p_checksums bigint[], p_txids text[], p_min_at timestamp with time zone[], p_max_at timestamp with time zone[], p_dedups integer[], p_dedup_txids text[], p_dedup_msg_ids uuid[]) RETURNS TABLE(partition_id uuid, outcome text, base_offset bigint, queue_id uuid, dup_txids text[], dup_message_ids uuid[])
    LANGUAGE plpgsql
    AS $$ -- the body of functions/queen.log_push_one_v1.sql
$$;

--
-- Name: log_push_undo(uuid[], integer[], bytea[]); Type: FUNCTION; Schema: queen; Owner: -
--

CREATE FUNCTION queen.log_push_undo(p_partitions uuid[], p_frames integer[], p_bodies bytea[]) RETURNS void
    LANGUAGE plpgsql
    AS $$ -- the body of functions/queen.log_push_undo.sql
$$;

--
-- Name: log_push_v2(uuid, uuid[], integer[], bytea[], bigint[], text[], timestamp with time zone[], timestamp with time zone[], integer[], text[], uuid[], integer); Type: FUNCTION; Schema: queen; Owner: -
--

CREATE FUNCTION queen.log_push_v2(p_shard uuid, p_partitions uuid[], p_frames integer[], p_bodies bytea[], p_checksums bigint[], p_txids text[], p_min_at timestamp with time zone[], p_max_at timestamp with time zone[], p_dedups integer[], p_dedup_txids text[], p_dedup_msg_ids uuid[], p_dedup_window integer) RETURNS TABLE(partition_id uuid, outcome text, base_offset bigint, queue_id uuid, dup_txids text[], dup_message_ids uuid[])
    LANGUAGE plpgsql
    AS $$ -- the body of functions/queen.log_push_v2.sql
$$;

--
-- Name: oldest_unconsumed(uuid, bigint, bigint); Type: FUNCTION; Schema: queen; Owner: -
--

CREATE FUNCTION queen.oldest_unconsumed(p_partition_id uuid, p_committed bigint, p_next_offset bigint) RETURNS TABLE(oldest timestamp with time zone)
    LANGUAGE plpgsql STABLE
    AS $$ -- the body of functions/queen.oldest_unconsumed.sql
$$;

--
-- Name: partition_id_near(uuid, uuid); Type: FUNCTION; Schema: queen; Owner: -
--

CREATE FUNCTION queen.partition_id_near(p_new uuid, p_near uuid) RETURNS uuid
    LANGUAGE plpgsql
    AS $$ -- the body of functions/queen.partition_id_near.sql
$$;

--
-- Name: pop(text, uuid, uuid[], text, integer, integer, uuid, text, bigint); Type: FUNCTION; Schema: queen; Owner: -
--

CREATE FUNCTION queen.pop(p_tenant text, p_queue_id uuid, p_candidates uuid[], p_group text, p_partitions integer, p_batch integer, p_lease_id uuid, p_sub_start text, p_max_bytes bigint) RETURNS TABLE(partition_id uuid, partition_name text, outcome text, retry_at timestamp with time zone, batch_start bigint, batch_end bigint, base_offset bigint, frame_count integer, body bytea, checksum bigint)
    LANGUAGE plpgsql
    AS $$ -- the body of functions/queen.pop.sql
$$;

--
-- Name: pop_v2(uuid, text, uuid, uuid[], text, integer, integer, uuid, text, bigint); Type: FUNCTION; Schema: queen; Owner: -
--

CREATE FUNCTION queen.pop_v2(p_shard uuid, p_tenant text, p_queue_id uuid, p_candidates uuid[], p_group text, p_partitions integer, p_batch integer, p_lease_id uuid, p_sub_start text, p_max_bytes bigint) RETURNS TABLE(partition_id uuid, partition_name text, outcome text, retry_at timestamp with time zone, batch_start bigint, batch_end bigint, base_offset bigint, frame_count integer, body bytea, checksum bigint)
    LANGUAGE plpgsql
    SET plan_cache_mode TO 'force_generic_plan'
    AS $$ -- the body of functions/queen.pop_v2.sql
$$;

--
-- Name: queue_admit(text, text); Type: FUNCTION; Schema: queen; Owner: -
--

CREATE FUNCTION queen.queue_admit(p_tenant text, p_queue text) RETURNS void
    LANGUAGE plpgsql
    AS $$ -- the body of functions/queen.queue_admit.sql
$$;

--
-- Name: raise_floors(uuid, integer, boolean); Type: FUNCTION; Schema: queen; Owner: -
--

CREATE FUNCTION queen.raise_floors(p_queue_id uuid, p_seconds integer, p_consumed boolean) RETURNS TABLE(partition_id uuid, removed bigint, released boolean)
    LANGUAGE plpgsql
    AS $$ -- the body of functions/queen.raise_floors.sql
$$;

--
-- Name: raise_floors_v2(uuid, uuid[], bigint[]); Type: FUNCTION; Schema: queen; Owner: -
--

CREATE FUNCTION queen.raise_floors_v2(p_shard uuid, p_partitions uuid[], p_floors bigint[]) RETURNS TABLE(partition_id uuid, removed bigint, released boolean)
    LANGUAGE plpgsql
    AS $$ -- the body of functions/queen.raise_floors_v2.sql
$$;

--
-- Name: resolve_partition_v2(text, text, text, boolean, uuid, uuid); Type: FUNCTION; Schema: queen; Owner: -
--

CREATE FUNCTION queen.resolve_partition_v2(p_tenant text, p_queue text, p_partition text, p_create boolean, p_new_queue_id uuid, p_new_partition_id uuid, OUT queue_id uuid, OUT partition_id uuid, OUT lease_time integer, OUT retry_limit integer, OUT delayed_processing integer, OUT encryption_enabled boolean) RETURNS SETOF record
    LANGUAGE plpgsql
    AS $$ -- the body of functions/queen.resolve_partition_v2.sql
$$;

--
-- Name: seek_to_v2(text, text, text, text, timestamp with time zone); Type: FUNCTION; Schema: queen; Owner: -
--

CREATE FUNCTION queen.seek_to_v2(p_tenant text, p_queue text, p_group text, p_partition text, p_at timestamp with time zone) RETURNS TABLE(queue_id uuid, partition_id uuid)
    LANGUAGE plpgsql
    AS $$ -- the body of functions/queen.seek_to_v2.sql
$$;

--
-- Name: segments_below_floors(uuid); Type: FUNCTION; Schema: queen; Owner: -
--

CREATE FUNCTION queen.segments_below_floors(p_queue_id uuid) RETURNS TABLE(shard uuid, partitions uuid[])
    LANGUAGE plpgsql
    AS $$ -- the body of functions/queen.segments_below_floors.sql
$$;

--
-- Name: shard_leads(uuid[]); Type: FUNCTION; Schema: queen; Owner: -
--

CREATE FUNCTION queen.shard_leads(p_ids uuid[]) RETURNS uuid[]
    LANGUAGE plpgsql STABLE
    AS $$ -- the body of functions/queen.shard_leads.sql
$$;

--
-- Name: trace_add(uuid, text, text, uuid, text, text, jsonb, text, text[]); Type: FUNCTION; Schema: queen; Owner: -
--

CREATE FUNCTION queen.trace_add(p_partition_id uuid, p_tenant text, p_txid text, p_id uuid, p_group text, p_event_type text, p_data jsonb, p_worker text, p_names text[]) RETURNS boolean
    LANGUAGE plpgsql
    AS $$ -- the body of functions/queen.trace_add.sql
$$;

--
-- Name: txid_offset_rows(uuid, bigint, bigint, text[]); Type: FUNCTION; Schema: queen; Owner: -
--

CREATE FUNCTION queen.txid_offset_rows(p_partition_id uuid, p_from bigint, p_to bigint, p_txids text[]) RETURNS TABLE(i bigint, off bigint)
    LANGUAGE plpgsql STABLE
    AS $$ -- the body of functions/queen.txid_offset_rows.sql
$$;

--
-- Name: txid_offsets(uuid, bigint, bigint, text[]); Type: FUNCTION; Schema: queen; Owner: -
--

CREATE FUNCTION queen.txid_offsets(p_partition_id uuid, p_from bigint, p_to bigint, p_txids text[]) RETURNS bigint[]
    LANGUAGE plpgsql STABLE
    AS $$ -- the body of functions/queen.txid_offsets.sql
$$;

--
-- Name: cycle_gate(queen_streams.cycle_request); Type: FUNCTION; Schema: queen_streams; Owner: -
--

CREATE FUNCTION queen_streams.cycle_gate(r queen_streams.cycle_request, OUT queue_id uuid, OUT queue_name text, OUT next_offset bigint) RETURNS record
    LANGUAGE plpgsql
    AS $$ -- the body of functions/queen_streams.cycle_gate.sql
$$;

--
-- Name: cycle_next(queen_streams.cycle_request, jsonb, uuid, integer, bigint); Type: FUNCTION; Schema: queen_streams; Owner: -
--

CREATE FUNCTION queen_streams.cycle_next(r queen_streams.cycle_request, p_table_rows jsonb, p_lease_id uuid, p_batch integer, p_max_bytes bigint) RETURNS TABLE(outcome text, queue_id uuid, queue_name text, base_offsets bigint[], ack_count bigint, lease_released boolean, announce boolean, partition_id uuid, dup_txids text[], dup_message_ids uuid[], state_at timestamp with time zone, partition_name text, retry_at timestamp with time zone, batch_start bigint, batch_end bigint, base_offset bigint, frame_count integer, body bytea, checksum bigint)
    LANGUAGE plpgsql
    AS $$ -- the body of functions/queen_streams.cycle_next.sql
$$;

--
-- Name: cycle_next_v2(uuid, queen_streams.cycle_request, jsonb, uuid, integer, bigint); Type: FUNCTION; Schema: queen_streams; Owner: -
--

CREATE FUNCTION queen_streams.cycle_next_v2(p_shard uuid, r queen_streams.cycle_request, p_table_rows jsonb, p_lease_id uuid, p_batch integer, p_max_bytes bigint) RETURNS TABLE(outcome text, queue_id uuid, queue_name text, base_offsets bigint[], ack_count bigint, lease_released boolean, announce boolean, partition_id uuid, dup_txids text[], dup_message_ids uuid[], state_at timestamp with time zone, partition_name text, retry_at timestamp with time zone, batch_start bigint, batch_end bigint, base_offset bigint, frame_count integer, body bytea, checksum bigint)
    LANGUAGE plpgsql
    AS $$ -- the body of functions/queen_streams.cycle_next_v2.sql
$$;

--
-- Name: cycle_owner(text, uuid, uuid); Type: FUNCTION; Schema: queen_streams; Owner: -
--

CREATE FUNCTION queen_streams.cycle_owner(p_tenant text, p_query_id uuid, p_partition_id uuid, OUT queue_id uuid, OUT queue_name text, OUT next_offset bigint) RETURNS record
    LANGUAGE plpgsql
    AS $$ -- the body of functions/queen_streams.cycle_owner.sql
$$;

--
-- Name: cycle_rules(queen_streams.cycle_request, queen_streams.cycle_answer, bigint); Type: FUNCTION; Schema: queen_streams; Owner: -
--

CREATE FUNCTION queen_streams.cycle_rules(r queen_streams.cycle_request, a queen_streams.cycle_answer, p_next_offset bigint) RETURNS SETOF queen_streams.cycle_answer
    LANGUAGE plpgsql
    AS $$ -- the body of functions/queen_streams.cycle_rules.sql
$$;

--
-- Name: cycle_short(queen_streams.cycle_request, queen_streams.cycle_answer, bigint); Type: FUNCTION; Schema: queen_streams; Owner: -
--

CREATE FUNCTION queen_streams.cycle_short(r queen_streams.cycle_request, a queen_streams.cycle_answer, p_next_offset bigint) RETURNS SETOF queen_streams.cycle_answer
    LANGUAGE plpgsql
    AS $$ -- the body of functions/queen_streams.cycle_short.sql
$$;

--
-- Name: cycle_stale(queen_streams.cycle_request); Type: FUNCTION; Schema: queen_streams; Owner: -
--

CREATE FUNCTION queen_streams.cycle_stale(r queen_streams.cycle_request) RETURNS TABLE(key text, implicit boolean, gone boolean)
    LANGUAGE plpgsql STABLE
    AS $$ -- the body of functions/queen_streams.cycle_stale.sql
$$;

--
-- Name: cycle_state(queen_streams.cycle_request); Type: FUNCTION; Schema: queen_streams; Owner: -
--

CREATE FUNCTION queen_streams.cycle_state(r queen_streams.cycle_request) RETURNS void
    LANGUAGE plpgsql
    AS $$ -- the body of functions/queen_streams.cycle_state.sql
$$;

--
-- Name: cycle_table(queen_streams.cycle_request, jsonb); Type: FUNCTION; Schema: queen_streams; Owner: -
--

CREATE FUNCTION queen_streams.cycle_table(r queen_streams.cycle_request, p_rows jsonb) RETURNS void
    LANGUAGE plpgsql
    AS $$ -- the body of functions/queen_streams.cycle_table.sql
$$;

--
-- Name: cycle_v5(queen_streams.cycle_request); Type: FUNCTION; Schema: queen_streams; Owner: -
--

CREATE FUNCTION queen_streams.cycle_v5(r queen_streams.cycle_request) RETURNS SETOF queen_streams.cycle_answer
    LANGUAGE plpgsql
    AS $$ -- the body of functions/queen_streams.cycle_v5.sql
$$;

--
-- Name: cycle_v6(queen_streams.cycle_request, jsonb); Type: FUNCTION; Schema: queen_streams; Owner: -
--

CREATE FUNCTION queen_streams.cycle_v6(r queen_streams.cycle_request, p_table_rows jsonb) RETURNS SETOF queen_streams.cycle_answer
    LANGUAGE plpgsql
    AS $$ -- the body of functions/queen_streams.cycle_v6.sql
$$;

--
-- Name: cycle_v7(uuid, queen_streams.cycle_request, jsonb); Type: FUNCTION; Schema: queen_streams; Owner: -
--

CREATE FUNCTION queen_streams.cycle_v7(p_shard uuid, r queen_streams.cycle_request, p_table_rows jsonb) RETURNS SETOF queen_streams.cycle_answer
    LANGUAGE plpgsql
    AS $$ -- the body of functions/queen_streams.cycle_v7.sql
$$;

--
-- Name: query_count(text); Type: FUNCTION; Schema: queen_streams; Owner: -
--

CREATE FUNCTION queen_streams.query_count(p_tenant text) RETURNS bigint
    LANGUAGE plpgsql STABLE
    AS $$ -- the body of functions/queen_streams.query_count.sql
$$;

--
-- Name: query_delete(text, text); Type: FUNCTION; Schema: queen_streams; Owner: -
--

CREATE FUNCTION queen_streams.query_delete(p_tenant text, p_name text) RETURNS boolean
    LANGUAGE plpgsql
    AS $$ -- the body of functions/queen_streams.query_delete.sql
$$;

--
-- Name: query_leases(text, text, text); Type: FUNCTION; Schema: queen_streams; Owner: -
--

CREATE FUNCTION queen_streams.query_leases(p_tenant text, p_name text, p_group text) RETURNS integer
    LANGUAGE plpgsql STABLE
    AS $$ -- the body of functions/queen_streams.query_leases.sql
$$;

--
-- Name: query_lock_cycles(text, uuid, text); Type: FUNCTION; Schema: queen_streams; Owner: -
--

CREATE FUNCTION queen_streams.query_lock_cycles(p_tenant text, p_query_id uuid, p_source text) RETURNS void
    LANGUAGE plpgsql
    AS $$ -- the body of functions/queen_streams.query_lock_cycles.sql
$$;

--
-- Name: query_open_windows(text, text, text, text); Type: FUNCTION; Schema: queen_streams; Owner: -
--

CREATE FUNCTION queen_streams.query_open_windows(p_tenant text, p_name text, p_prefix text, p_clock text) RETURNS bigint
    LANGUAGE plpgsql STABLE
    AS $$ -- the body of functions/queen_streams.query_open_windows.sql
$$;

--
-- Name: query_progress_v2(text, text, text, text); Type: FUNCTION; Schema: queen_streams; Owner: -
--

CREATE FUNCTION queen_streams.query_progress_v2(p_tenant text, p_name text, p_group text, p_source text) RETURNS TABLE(lag bigint, oldest timestamp with time zone, state_rows bigint, last_cycle timestamp with time zone, reset_generation bigint)
    LANGUAGE plpgsql STABLE
    AS $$ -- the body of functions/queen_streams.query_progress_v2.sql
$$;

--
-- Name: query_reset_generation(text, text); Type: FUNCTION; Schema: queen_streams; Owner: -
--

CREATE FUNCTION queen_streams.query_reset_generation(p_tenant text, p_name text) RETURNS bigint
    LANGUAGE plpgsql STABLE
    AS $$ -- the body of functions/queen_streams.query_reset_generation.sql
$$;

--
-- Name: query_rewind(text, text, text, text, timestamp with time zone); Type: FUNCTION; Schema: queen_streams; Owner: -
--

CREATE FUNCTION queen_streams.query_rewind(p_tenant text, p_name text, p_group text, p_token text, p_to timestamp with time zone, OUT outcome text, OUT rewound_at timestamp with time zone, OUT partitions integer, OUT state_rows bigint) RETURNS record
    LANGUAGE plpgsql
    AS $$ -- the body of functions/queen_streams.query_rewind.sql
$$;

--
-- Name: query_source_load(text, text, text); Type: FUNCTION; Schema: queen_streams; Owner: -
--

CREATE FUNCTION queen_streams.query_source_load(p_tenant text, p_source text, p_group text) RETURNS TABLE(partitions_behind bigint, last_push timestamp with time zone)
    LANGUAGE plpgsql STABLE
    AS $$ -- the body of functions/queen_streams.query_source_load.sql
$$;

--
-- Name: query_suspend(text, text, text, boolean); Type: FUNCTION; Schema: queen_streams; Owner: -
--

CREATE FUNCTION queen_streams.query_suspend(p_tenant text, p_name text, p_group text, p_suspended boolean) RETURNS boolean
    LANGUAGE plpgsql
    AS $$ -- the body of functions/queen_streams.query_suspend.sql
$$;

--
-- Name: quota_apply_v2(text, boolean, integer, integer, bigint, bigint, bigint, bigint, bigint, bigint, bigint); Type: FUNCTION; Schema: queen_streams; Owner: -
--

CREATE FUNCTION queen_streams.quota_apply_v2(p_tenant text, p_enabled boolean, p_max_queries integer, p_max_queues integer, p_push_messages_per_second bigint, p_push_messages_burst bigint, p_push_bytes_per_second bigint, p_push_bytes_burst bigint, p_pop_messages_per_second bigint, p_max_stored_bytes bigint, p_max_state_rows bigint) RETURNS bigint
    LANGUAGE plpgsql
    AS $$ -- the body of functions/queen_streams.quota_apply_v2.sql
$$;

--
-- Name: quota_delete(text); Type: FUNCTION; Schema: queen_streams; Owner: -
--

CREATE FUNCTION queen_streams.quota_delete(p_tenant text) RETURNS void
    LANGUAGE plpgsql
    AS $$ -- the body of functions/queen_streams.quota_delete.sql
$$;

--
-- Name: quota_lease(text, text, bigint); Type: FUNCTION; Schema: queen_streams; Owner: -
--

CREATE FUNCTION queen_streams.quota_lease(p_tenant text, p_kind text, p_want bigint) RETURNS bigint
    LANGUAGE plpgsql
    AS $$ -- the body of functions/queen_streams.quota_lease.sql
$$;

--
-- Name: quota_limits(); Type: FUNCTION; Schema: queen_streams; Owner: -
--

CREATE FUNCTION queen_streams.quota_limits() RETURNS TABLE(tenant text, push_messages_per_second bigint, push_messages_burst bigint, push_bytes_per_second bigint, push_bytes_burst bigint, pop_messages_per_second bigint, max_stored_bytes bigint, stored_bytes bigint)
    LANGUAGE plpgsql STABLE
    AS $$ -- the body of functions/queen_streams.quota_limits.sql
$$;

--
-- Name: quota_record(text[], bigint[], bigint[], text[], text[]); Type: FUNCTION; Schema: queen_streams; Owner: -
--

CREATE FUNCTION queen_streams.quota_record(p_tenants text[], p_pushed bigint[], p_popped bigint[], p_refused_tenants text[], p_refused_quotas text[]) RETURNS void
    LANGUAGE plpgsql
    AS $$ -- the body of functions/queen_streams.quota_record.sql
$$;

--
-- Name: quota_usage(text, interval); Type: FUNCTION; Schema: queen_streams; Owner: -
--

CREATE FUNCTION queen_streams.quota_usage(p_tenant text, p_within interval) RETURNS TABLE(queues bigint, queries bigint, stored_bytes bigint, state_rows bigint, pushed_last_minute bigint, popped_last_minute bigint, refusing text[])
    LANGUAGE plpgsql STABLE
    AS $$ -- the body of functions/queen_streams.quota_usage.sql
$$;

--
-- Name: refuse_lease(uuid, text, uuid); Type: FUNCTION; Schema: queen_streams; Owner: -
--

CREATE FUNCTION queen_streams.refuse_lease(p_partition_id uuid, p_group text, p_lease_id uuid) RETURNS void
    LANGUAGE plpgsql
    AS $$ -- the body of functions/queen_streams.refuse_lease.sql
$$;

--
-- Name: register_v2(text, text, text, text, text, boolean, uuid); Type: FUNCTION; Schema: queen_streams; Owner: -
--

CREATE FUNCTION queen_streams.register_v2(p_tenant text, p_name text, p_source text, p_sink text, p_config_hash text, p_reset boolean, p_new_id uuid, OUT outcome text, OUT query_id uuid, OUT fresh boolean, OUT message text, OUT reset_generation bigint) RETURNS record
    LANGUAGE plpgsql
    AS $$ -- the body of functions/queen_streams.register_v2.sql
$$;

--
-- Name: register_v3(text, text, text, text, text, boolean, uuid, boolean, text, text, text[], text); Type: FUNCTION; Schema: queen_streams; Owner: -
--

CREATE FUNCTION queen_streams.register_v3(p_tenant text, p_name text, p_source text, p_sink text, p_config_hash text, p_reset boolean, p_new_id uuid, p_sink_set boolean, p_sink_schema text, p_sink_table text, p_sink_keys text[], p_sink_mode text, OUT outcome text, OUT query_id uuid, OUT fresh boolean, OUT message text, OUT reset_generation bigint, OUT sink_table text) RETURNS record
    LANGUAGE plpgsql
    AS $$ -- the body of functions/queen_streams.register_v3.sql
$$;

--
-- Name: savepoint_list(text, text); Type: FUNCTION; Schema: queen_streams; Owner: -
--

CREATE FUNCTION queen_streams.savepoint_list(p_tenant text, p_name text) RETURNS TABLE(name text, taken_at timestamp with time zone, config_hash text, state_rows bigint, cursors integer)
    LANGUAGE plpgsql STABLE
    AS $$ -- the body of functions/queen_streams.savepoint_list.sql
$$;

--
-- Name: savepoint_prune(text, text, integer); Type: FUNCTION; Schema: queen_streams; Owner: -
--

CREATE FUNCTION queen_streams.savepoint_prune(p_tenant text, p_name text, p_keep integer) RETURNS integer
    LANGUAGE plpgsql
    AS $$ -- the body of functions/queen_streams.savepoint_prune.sql
$$;

--
-- Name: savepoint_restore(text, text, text, text, text); Type: FUNCTION; Schema: queen_streams; Owner: -
--

CREATE FUNCTION queen_streams.savepoint_restore(p_tenant text, p_name text, p_group text, p_savepoint text, p_token text, OUT outcome text, OUT restored_at timestamp with time zone, OUT config_hash text, OUT pipeline text, OUT state_rows bigint, OUT cursors integer) RETURNS record
    LANGUAGE plpgsql
    AS $$ -- the body of functions/queen_streams.savepoint_restore.sql
$$;

--
-- Name: savepoint_take(text, text, text, text, text); Type: FUNCTION; Schema: queen_streams; Owner: -
--

CREATE FUNCTION queen_streams.savepoint_take(p_tenant text, p_name text, p_group text, p_savepoint text, p_pipeline text, OUT outcome text, OUT taken_at timestamp with time zone, OUT config_hash text, OUT state_rows bigint, OUT cursors integer) RETURNS record
    LANGUAGE plpgsql
    AS $$ -- the body of functions/queen_streams.savepoint_take.sql
$$;

--
-- Name: sink_table_check(text, text, text, text[], text); Type: FUNCTION; Schema: queen_streams; Owner: -
--

CREATE FUNCTION queen_streams.sink_table_check(p_tenant text, p_schema text, p_table text, p_keys text[], p_mode text) RETURNS void
    LANGUAGE plpgsql STABLE
    AS $$ -- the body of functions/queen_streams.sink_table_check.sql
$$;

--
-- Name: sink_table_columns(text, text, text); Type: FUNCTION; Schema: queen_streams; Owner: -
--

CREATE FUNCTION queen_streams.sink_table_columns(p_tenant text, p_schema text, p_table text) RETURNS TABLE(name text, type text, required boolean)
    LANGUAGE sql STABLE
    AS $$ -- the body of functions/queen_streams.sink_table_columns.sql
$$;

--
-- Name: sink_table_create(text, text, text[], text[], text[]); Type: FUNCTION; Schema: queen_streams; Owner: -
--

CREATE FUNCTION queen_streams.sink_table_create(p_tenant text, p_table text, p_columns text[], p_types text[], p_keys text[]) RETURNS boolean
    LANGUAGE plpgsql
    AS $$ -- the body of functions/queen_streams.sink_table_create.sql
$$;

--
-- Name: sink_table_rows(text, text); Type: FUNCTION; Schema: queen_streams; Owner: -
--

CREATE FUNCTION queen_streams.sink_table_rows(p_tenant text, p_table text, OUT rows bigint, OUT estimated boolean) RETURNS record
    LANGUAGE plpgsql STABLE
    AS $$ -- the body of functions/queen_streams.sink_table_rows.sql
$$;

--
-- Name: state_rows_add(text, uuid, uuid, bigint); Type: FUNCTION; Schema: queen_streams; Owner: -
--

CREATE FUNCTION queen_streams.state_rows_add(p_tenant text, p_query_id uuid, p_partition_id uuid, p_delta bigint) RETURNS void
    LANGUAGE plpgsql
    AS $$ -- the body of functions/queen_streams.state_rows_add.sql
$$;

--
-- Name: tenant_schema(text, text); Type: FUNCTION; Schema: queen_streams; Owner: -
--

CREATE FUNCTION queen_streams.tenant_schema(p_tenant text, p_schema text) RETURNS text
    LANGUAGE plpgsql IMMUTABLE
    AS $$ -- the body of functions/queen_streams.tenant_schema.sql
$$;

--
-- Name: walk_frames(uuid, bigint, bigint, bigint); Type: FUNCTION; Schema: queen_streams; Owner: -
--

CREATE FUNCTION queen_streams.walk_frames(p_partition_id uuid, p_from bigint, p_limit bigint, p_count bigint, OUT next_offset bigint, OUT walked bigint) RETURNS record
    LANGUAGE plpgsql STABLE
    AS $$ -- the body of functions/queen_streams.walk_frames.sql
$$;

--
-- Name: dead_letters; Type: TABLE; Schema: queen; Owner: -
--

CREATE TABLE queen.dead_letters (
    message_id uuid NOT NULL,
    partition_id uuid NOT NULL,
    consumer_group text NOT NULL,
    transaction_id text NOT NULL,
    payload bytea,
    key_id bigint,
    error_message text,
    retry_count integer DEFAULT 0 NOT NULL,
    created_at timestamp with time zone NOT NULL,
    failed_at timestamp with time zone DEFAULT now() NOT NULL
);

--
-- Name: group_minutes; Type: TABLE; Schema: queen; Owner: -
--

CREATE TABLE queen.group_minutes (
    tenant text NOT NULL,
    queue text NOT NULL,
    consumer_group text NOT NULL,
    minute timestamp with time zone NOT NULL,
    lag bigint NOT NULL,
    lag_seconds double precision NOT NULL
);

--
-- Name: log_segments; Type: TABLE; Schema: queen; Owner: -
--

CREATE TABLE queen.log_segments (
    partition_id uuid NOT NULL,
    base_offset bigint NOT NULL,
    frame_count integer NOT NULL,
    body bytea NOT NULL,
    checksum bigint NOT NULL,
    txids text[] NOT NULL,
    min_created_at timestamp with time zone NOT NULL,
    max_created_at timestamp with time zone NOT NULL,
    CONSTRAINT log_segments_frame_count_check CHECK ((frame_count > 0))
)
WITH (toast_tuple_target='8160');
ALTER TABLE ONLY queen.log_segments ALTER COLUMN body SET STORAGE EXTERNAL;

--
-- Name: partitions; Type: TABLE; Schema: queen; Owner: -
--

CREATE TABLE queen.partitions (
    id uuid NOT NULL,
    queue_id uuid NOT NULL,
    name text NOT NULL,
    next_offset bigint DEFAULT 0 NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    last_push_at timestamp with time zone,
    stored_bytes bigint DEFAULT 0 NOT NULL,
    floor_offset bigint DEFAULT 0 NOT NULL
);

--
-- Name: push_dedup; Type: TABLE; Schema: queen; Owner: -
--

CREATE TABLE queen.push_dedup (
    partition_id uuid NOT NULL,
    transaction_id text NOT NULL,
    message_id uuid NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL
);

--
-- Name: queue_minutes; Type: TABLE; Schema: queen; Owner: -
--

CREATE TABLE queen.queue_minutes (
    tenant text NOT NULL,
    minute timestamp with time zone NOT NULL,
    queue text NOT NULL,
    replica text NOT NULL,
    push_requests bigint DEFAULT 0 NOT NULL,
    push_messages bigint DEFAULT 0 NOT NULL,
    pop_requests bigint DEFAULT 0 NOT NULL,
    pop_messages bigint DEFAULT 0 NOT NULL,
    pop_empty bigint DEFAULT 0 NOT NULL,
    ack_requests bigint DEFAULT 0 NOT NULL,
    ack_success bigint DEFAULT 0 NOT NULL,
    ack_failed bigint DEFAULT 0 NOT NULL,
    dead_lettered bigint DEFAULT 0 NOT NULL,
    transactions bigint DEFAULT 0 NOT NULL,
    lag_sum_ms bigint DEFAULT 0 NOT NULL,
    lag_count bigint DEFAULT 0 NOT NULL,
    lag_max_ms bigint DEFAULT 0 NOT NULL,
    parked_sum bigint DEFAULT 0 NOT NULL
);

--
-- Name: queues; Type: TABLE; Schema: queen; Owner: -
--

CREATE TABLE queen.queues (
    id uuid NOT NULL,
    tenant text DEFAULT 'default'::text NOT NULL,
    name text NOT NULL,
    namespace text,
    task text,
    lease_time integer DEFAULT 300 NOT NULL,
    retry_limit integer DEFAULT 3 NOT NULL,
    retry_delay integer DEFAULT 1000 NOT NULL,
    max_size integer DEFAULT 0 NOT NULL,
    ttl integer DEFAULT 3600 NOT NULL,
    priority integer DEFAULT 0 NOT NULL,
    delayed_processing integer DEFAULT 0 NOT NULL,
    window_buffer integer DEFAULT 0 NOT NULL,
    retention_seconds integer DEFAULT 0 NOT NULL,
    completed_retention_seconds integer DEFAULT 0 NOT NULL,
    retention_enabled boolean DEFAULT false NOT NULL,
    encryption_enabled boolean DEFAULT false NOT NULL,
    dead_letter_queue boolean DEFAULT false NOT NULL,
    dlq_after_max_retries boolean DEFAULT false NOT NULL,
    max_wait_time_seconds integer DEFAULT 0 NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    dedup_window_seconds integer,
    storage text DEFAULT 'rows'::text NOT NULL,
    CONSTRAINT queues_dedup_window_seconds_check CHECK ((dedup_window_seconds >= 0)),
    CONSTRAINT queues_storage_check CHECK ((storage = ANY (ARRAY['rows'::text, 'segments'::text])))
);

--
-- Name: replica_samples; Type: TABLE; Schema: queen; Owner: -
--

CREATE TABLE queen.replica_samples (
    replica text NOT NULL,
    minute timestamp with time zone NOT NULL,
    sampled_at timestamp with time zone NOT NULL,
    cpu_user_pct double precision NOT NULL,
    cpu_sys_pct double precision NOT NULL,
    rss_bytes bigint NOT NULL,
    virtual_bytes bigint NOT NULL,
    pool_size integer NOT NULL,
    pool_idle integer NOT NULL,
    pool_active integer NOT NULL
);

--
-- Name: retention_events; Type: TABLE; Schema: queen; Owner: -
--

CREATE TABLE queen.retention_events (
    tenant text NOT NULL,
    at timestamp with time zone DEFAULT now() NOT NULL,
    queue text NOT NULL,
    partition_id uuid NOT NULL,
    kind text NOT NULL,
    messages bigint NOT NULL,
    CONSTRAINT retention_events_kind_check CHECK ((kind = ANY (ARRAY['retention'::text, 'completed_retention'::text, 'eviction'::text])))
);

--
-- Name: subscriptions; Type: TABLE; Schema: queen; Owner: -
--

CREATE TABLE queen.subscriptions (
    queue_id uuid NOT NULL,
    consumer_group text NOT NULL,
    starts_after timestamp with time zone NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    mode text
);

--
-- Name: system_flags; Type: TABLE; Schema: queen; Owner: -
--

CREATE TABLE queen.system_flags (
    name text NOT NULL,
    enabled boolean NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL
);

--
-- Name: trace_names; Type: TABLE; Schema: queen; Owner: -
--

CREATE TABLE queen.trace_names (
    tenant text NOT NULL,
    name text NOT NULL,
    trace_id uuid NOT NULL,
    partition_id uuid
);

--
-- Name: traces; Type: TABLE; Schema: queen; Owner: -
--

CREATE TABLE queen.traces (
    id uuid NOT NULL,
    partition_id uuid NOT NULL,
    transaction_id text NOT NULL,
    message_offset bigint NOT NULL,
    consumer_group text NOT NULL,
    event_type text NOT NULL,
    data jsonb NOT NULL,
    worker_id text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL
);

--
-- Name: queries; Type: TABLE; Schema: queen_streams; Owner: -
--

CREATE TABLE queen_streams.queries (
    id uuid NOT NULL,
    tenant text DEFAULT 'default'::text NOT NULL,
    name text NOT NULL,
    source_queue text NOT NULL,
    sink_queue text,
    config_hash text NOT NULL,
    reset_generation bigint DEFAULT 0 NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    suspended boolean DEFAULT false NOT NULL,
    rewind_token text,
    rewound_at timestamp with time zone,
    rewind_to timestamp with time zone,
    rewind_partitions integer,
    restore_token text,
    restored_at timestamp with time zone,
    restored_from text,
    sink_table text,
    sink_keys text[],
    sink_mode text,
    CONSTRAINT queries_sink_complete CHECK (((sink_table IS NULL) = (sink_mode IS NULL))),
    CONSTRAINT queries_sink_mode_check CHECK ((sink_mode = ANY (ARRAY['upsert'::text, 'append'::text])))
);

--
-- Name: query_minutes; Type: TABLE; Schema: queen_streams; Owner: -
--

CREATE TABLE queen_streams.query_minutes (
    tenant text NOT NULL,
    query_id uuid NOT NULL,
    minute timestamp with time zone NOT NULL,
    replica text NOT NULL,
    cycles bigint DEFAULT 0 NOT NULL,
    refused bigint DEFAULT 0 NOT NULL
);

--
-- Name: quota; Type: TABLE; Schema: queen_streams; Owner: -
--

CREATE TABLE queen_streams.quota (
    tenant text NOT NULL,
    enabled boolean DEFAULT true NOT NULL,
    max_queries integer,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    max_queues integer,
    push_messages_per_second bigint,
    push_messages_burst bigint,
    push_bytes_per_second bigint,
    push_bytes_burst bigint,
    pop_messages_per_second bigint,
    max_stored_bytes bigint,
    max_state_rows bigint,
    CONSTRAINT quota_check CHECK ((push_messages_burst >= push_messages_per_second)),
    CONSTRAINT quota_check1 CHECK ((push_bytes_burst >= push_bytes_per_second)),
    CONSTRAINT quota_max_queries_check CHECK ((max_queries >= 0)),
    CONSTRAINT quota_max_queues_check CHECK ((max_queues >= 0)),
    CONSTRAINT quota_max_state_rows_check CHECK ((max_state_rows >= 0)),
    CONSTRAINT quota_max_stored_bytes_check CHECK ((max_stored_bytes >= 0)),
    CONSTRAINT quota_pop_messages_per_second_check CHECK ((pop_messages_per_second > 0)),
    CONSTRAINT quota_push_bytes_per_second_check CHECK ((push_bytes_per_second > 0)),
    CONSTRAINT quota_push_messages_per_second_check CHECK ((push_messages_per_second > 0))
);

--
-- Name: quota_budget; Type: TABLE; Schema: queen_streams; Owner: -
--

CREATE TABLE queen_streams.quota_budget (
    tenant text NOT NULL,
    kind text NOT NULL,
    tokens double precision NOT NULL,
    refilled_at timestamp with time zone NOT NULL
);

--
-- Name: quota_meter; Type: TABLE; Schema: queen_streams; Owner: -
--

CREATE TABLE queen_streams.quota_meter (
    tenant text NOT NULL,
    bucket timestamp with time zone NOT NULL,
    pushed bigint DEFAULT 0 NOT NULL,
    popped bigint DEFAULT 0 NOT NULL
);

--
-- Name: quota_refusals; Type: TABLE; Schema: queen_streams; Owner: -
--

CREATE TABLE queen_streams.quota_refusals (
    tenant text NOT NULL,
    quota text NOT NULL,
    refused_at timestamp with time zone NOT NULL
);

--
-- Name: savepoint_cursors; Type: TABLE; Schema: queen_streams; Owner: -
--

CREATE TABLE queen_streams.savepoint_cursors (
    query_id uuid NOT NULL,
    name text NOT NULL,
    partition_id uuid NOT NULL,
    committed bigint NOT NULL
);

--
-- Name: savepoint_state; Type: TABLE; Schema: queen_streams; Owner: -
--

CREATE TABLE queen_streams.savepoint_state (
    query_id uuid NOT NULL,
    name text NOT NULL,
    partition_id uuid NOT NULL,
    key text NOT NULL COLLATE pg_catalog."C",
    value jsonb NOT NULL,
    updated_at timestamp with time zone NOT NULL
);

--
-- Name: savepoints; Type: TABLE; Schema: queen_streams; Owner: -
--

CREATE TABLE queen_streams.savepoints (
    query_id uuid NOT NULL,
    name text NOT NULL,
    consumer_group text NOT NULL,
    config_hash text NOT NULL,
    pipeline text,
    state_rows bigint NOT NULL,
    cursors integer NOT NULL,
    taken_at timestamp with time zone DEFAULT now() NOT NULL
);

--
-- Name: sink_writes; Type: TABLE; Schema: queen_streams; Owner: -
--

CREATE TABLE queen_streams.sink_writes (
    query_id uuid NOT NULL,
    partition_id uuid NOT NULL,
    rows bigint NOT NULL,
    written_at timestamp with time zone NOT NULL
);

--
-- Name: state; Type: TABLE; Schema: queen_streams; Owner: -
--

CREATE TABLE queen_streams.state (
    query_id uuid NOT NULL,
    partition_id uuid NOT NULL,
    key text NOT NULL COLLATE pg_catalog."C",
    value jsonb NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    ripe_read_at timestamp with time zone
)
WITH (fillfactor='70');

--
-- Name: state_rows; Type: TABLE; Schema: queen_streams; Owner: -
--

CREATE TABLE queen_streams.state_rows (
    query_id uuid NOT NULL,
    partition_id uuid NOT NULL,
    row_count bigint NOT NULL
);

--
-- Name: cursors cursors_pkey; Type: CONSTRAINT; Schema: queen; Owner: -
--

ALTER TABLE ONLY queen.cursors
    ADD CONSTRAINT cursors_pkey PRIMARY KEY (partition_id, consumer_group);

--
-- Name: dead_letters dead_letters_pkey; Type: CONSTRAINT; Schema: queen; Owner: -
--

ALTER TABLE ONLY queen.dead_letters
    ADD CONSTRAINT dead_letters_pkey PRIMARY KEY (partition_id, consumer_group, message_id);

--
-- Name: group_minutes group_minutes_pkey; Type: CONSTRAINT; Schema: queen; Owner: -
--

ALTER TABLE ONLY queen.group_minutes
    ADD CONSTRAINT group_minutes_pkey PRIMARY KEY (tenant, queue, minute, consumer_group);

--
-- Name: log_segments log_segments_pkey; Type: CONSTRAINT; Schema: queen; Owner: -
--

ALTER TABLE ONLY queen.log_segments
    ADD CONSTRAINT log_segments_pkey PRIMARY KEY (partition_id, base_offset);

--
-- Name: partitions partitions_pkey; Type: CONSTRAINT; Schema: queen; Owner: -
--

ALTER TABLE ONLY queen.partitions
    ADD CONSTRAINT partitions_pkey PRIMARY KEY (id);

--
-- Name: partitions partitions_queue_id_name_key; Type: CONSTRAINT; Schema: queen; Owner: -
--

ALTER TABLE ONLY queen.partitions
    ADD CONSTRAINT partitions_queue_id_name_key UNIQUE (queue_id, name);

--
-- Name: push_dedup push_dedup_pkey; Type: CONSTRAINT; Schema: queen; Owner: -
--

ALTER TABLE ONLY queen.push_dedup
    ADD CONSTRAINT push_dedup_pkey PRIMARY KEY (partition_id, transaction_id);

--
-- Name: queue_minutes queue_minutes_pkey; Type: CONSTRAINT; Schema: queen; Owner: -
--

ALTER TABLE ONLY queen.queue_minutes
    ADD CONSTRAINT queue_minutes_pkey PRIMARY KEY (tenant, minute, queue, replica);

--
-- Name: queues queues_pkey; Type: CONSTRAINT; Schema: queen; Owner: -
--

ALTER TABLE ONLY queen.queues
    ADD CONSTRAINT queues_pkey PRIMARY KEY (id);

--
-- Name: queues queues_tenant_name_key; Type: CONSTRAINT; Schema: queen; Owner: -
--

ALTER TABLE ONLY queen.queues
    ADD CONSTRAINT queues_tenant_name_key UNIQUE (tenant, name);

--
-- Name: replica_samples replica_samples_pkey; Type: CONSTRAINT; Schema: queen; Owner: -
--

ALTER TABLE ONLY queen.replica_samples
    ADD CONSTRAINT replica_samples_pkey PRIMARY KEY (minute, replica);

--
-- Name: subscriptions subscriptions_pkey; Type: CONSTRAINT; Schema: queen; Owner: -
--

ALTER TABLE ONLY queen.subscriptions
    ADD CONSTRAINT subscriptions_pkey PRIMARY KEY (queue_id, consumer_group);

--
-- Name: system_flags system_flags_pkey; Type: CONSTRAINT; Schema: queen; Owner: -
--

ALTER TABLE ONLY queen.system_flags
    ADD CONSTRAINT system_flags_pkey PRIMARY KEY (name);

--
-- Name: trace_names trace_names_pkey; Type: CONSTRAINT; Schema: queen; Owner: -
--

ALTER TABLE ONLY queen.trace_names
    ADD CONSTRAINT trace_names_pkey PRIMARY KEY (tenant, name, trace_id);

--
-- Name: traces traces_partition_id_id_key; Type: CONSTRAINT; Schema: queen; Owner: -
--

ALTER TABLE ONLY queen.traces
    ADD CONSTRAINT traces_partition_id_id_key UNIQUE (partition_id, id);

--
-- Name: traces traces_pkey; Type: CONSTRAINT; Schema: queen; Owner: -
--

ALTER TABLE ONLY queen.traces
    ADD CONSTRAINT traces_pkey PRIMARY KEY (id);

--
-- Name: queries queries_pkey; Type: CONSTRAINT; Schema: queen_streams; Owner: -
--

ALTER TABLE ONLY queen_streams.queries
    ADD CONSTRAINT queries_pkey PRIMARY KEY (id);

--
-- Name: queries queries_tenant_name_key; Type: CONSTRAINT; Schema: queen_streams; Owner: -
--

ALTER TABLE ONLY queen_streams.queries
    ADD CONSTRAINT queries_tenant_name_key UNIQUE (tenant, name);

--
-- Name: query_minutes query_minutes_pkey; Type: CONSTRAINT; Schema: queen_streams; Owner: -
--

ALTER TABLE ONLY queen_streams.query_minutes
    ADD CONSTRAINT query_minutes_pkey PRIMARY KEY (tenant, query_id, minute, replica);

--
-- Name: quota_budget quota_budget_pkey; Type: CONSTRAINT; Schema: queen_streams; Owner: -
--

ALTER TABLE ONLY queen_streams.quota_budget
    ADD CONSTRAINT quota_budget_pkey PRIMARY KEY (tenant, kind);

--
-- Name: quota_meter quota_meter_pkey; Type: CONSTRAINT; Schema: queen_streams; Owner: -
--

ALTER TABLE ONLY queen_streams.quota_meter
    ADD CONSTRAINT quota_meter_pkey PRIMARY KEY (tenant, bucket);

--
-- Name: quota quota_pkey; Type: CONSTRAINT; Schema: queen_streams; Owner: -
--

ALTER TABLE ONLY queen_streams.quota
    ADD CONSTRAINT quota_pkey PRIMARY KEY (tenant);

--
-- Name: quota_refusals quota_refusals_pkey; Type: CONSTRAINT; Schema: queen_streams; Owner: -
--

ALTER TABLE ONLY queen_streams.quota_refusals
    ADD CONSTRAINT quota_refusals_pkey PRIMARY KEY (tenant, quota);

--
-- Name: savepoint_cursors savepoint_cursors_pkey; Type: CONSTRAINT; Schema: queen_streams; Owner: -
--

ALTER TABLE ONLY queen_streams.savepoint_cursors
    ADD CONSTRAINT savepoint_cursors_pkey PRIMARY KEY (query_id, name, partition_id);

--
-- Name: savepoints savepoints_pkey; Type: CONSTRAINT; Schema: queen_streams; Owner: -
--

ALTER TABLE ONLY queen_streams.savepoints
    ADD CONSTRAINT savepoints_pkey PRIMARY KEY (query_id, name);

--
-- Name: sink_writes sink_writes_pkey; Type: CONSTRAINT; Schema: queen_streams; Owner: -
--

ALTER TABLE ONLY queen_streams.sink_writes
    ADD CONSTRAINT sink_writes_pkey PRIMARY KEY (query_id, partition_id);

--
-- Name: state state_pkey; Type: CONSTRAINT; Schema: queen_streams; Owner: -
--

ALTER TABLE ONLY queen_streams.state
    ADD CONSTRAINT state_pkey PRIMARY KEY (query_id, partition_id, key);

--
-- Name: state_rows state_rows_pkey; Type: CONSTRAINT; Schema: queen_streams; Owner: -
--

ALTER TABLE ONLY queen_streams.state_rows
    ADD CONSTRAINT state_rows_pkey PRIMARY KEY (query_id, partition_id);

--
-- Name: cursors_lease_idx; Type: INDEX; Schema: queen; Owner: -
--

CREATE INDEX cursors_lease_idx ON queen.cursors USING btree (lease_id) WHERE (lease_id IS NOT NULL);

--
-- Name: dead_letters_failed_idx; Type: INDEX; Schema: queen; Owner: -
--

CREATE INDEX dead_letters_failed_idx ON queen.dead_letters USING btree (failed_at);

--
-- Name: group_minutes_minute_brin; Type: INDEX; Schema: queen; Owner: -
--

CREATE INDEX group_minutes_minute_brin ON queen.group_minutes USING brin (minute);

--
-- Name: log_segments_time_brin; Type: INDEX; Schema: queen; Owner: -
--

CREATE INDEX log_segments_time_brin ON queen.log_segments USING brin (max_created_at);

--
-- Name: push_dedup_created_brin; Type: INDEX; Schema: queen; Owner: -
--

CREATE INDEX push_dedup_created_brin ON queen.push_dedup USING brin (created_at);

--
-- Name: queue_minutes_minute_brin; Type: INDEX; Schema: queen; Owner: -
--

CREATE INDEX queue_minutes_minute_brin ON queen.queue_minutes USING brin (minute);

--
-- Name: retention_events_tenant_at_idx; Type: INDEX; Schema: queen; Owner: -
--

CREATE INDEX retention_events_tenant_at_idx ON queen.retention_events USING btree (tenant, at);

--
-- Name: trace_names_partition_trace_idx; Type: INDEX; Schema: queen; Owner: -
--

CREATE INDEX trace_names_partition_trace_idx ON queen.trace_names USING btree (partition_id, trace_id);

--
-- Name: trace_names_trace_idx; Type: INDEX; Schema: queen; Owner: -
--

CREATE INDEX trace_names_trace_idx ON queen.trace_names USING btree (trace_id);

--
-- Name: traces_message_idx; Type: INDEX; Schema: queen; Owner: -
--

CREATE INDEX traces_message_idx ON queen.traces USING btree (partition_id, transaction_id, id);

--
-- Name: query_minutes_minute_brin; Type: INDEX; Schema: queen_streams; Owner: -
--

CREATE INDEX query_minutes_minute_brin ON queen_streams.query_minutes USING brin (minute);

--
-- Name: savepoint_state_of; Type: INDEX; Schema: queen_streams; Owner: -
--

CREATE INDEX savepoint_state_of ON queen_streams.savepoint_state USING btree (query_id, name);

--
-- Name: cursors cursors_partition_id_fkey; Type: FK CONSTRAINT; Schema: queen; Owner: -
--

ALTER TABLE ONLY queen.cursors
    ADD CONSTRAINT cursors_partition_id_fkey FOREIGN KEY (partition_id) REFERENCES queen.partitions(id) ON DELETE CASCADE;

--
-- Name: dead_letters dead_letters_partition_id_fkey; Type: FK CONSTRAINT; Schema: queen; Owner: -
--

ALTER TABLE ONLY queen.dead_letters
    ADD CONSTRAINT dead_letters_partition_id_fkey FOREIGN KEY (partition_id) REFERENCES queen.partitions(id) ON DELETE CASCADE;

--
-- Name: log_segments log_segments_partition_id_fkey; Type: FK CONSTRAINT; Schema: queen; Owner: -
--

ALTER TABLE ONLY queen.log_segments
    ADD CONSTRAINT log_segments_partition_id_fkey FOREIGN KEY (partition_id) REFERENCES queen.partitions(id) ON DELETE CASCADE;

--
-- Name: partitions partitions_queue_id_fkey; Type: FK CONSTRAINT; Schema: queen; Owner: -
--

ALTER TABLE ONLY queen.partitions
    ADD CONSTRAINT partitions_queue_id_fkey FOREIGN KEY (queue_id) REFERENCES queen.queues(id) ON DELETE CASCADE;

--
-- Name: subscriptions subscriptions_queue_id_fkey; Type: FK CONSTRAINT; Schema: queen; Owner: -
--

ALTER TABLE ONLY queen.subscriptions
    ADD CONSTRAINT subscriptions_queue_id_fkey FOREIGN KEY (queue_id) REFERENCES queen.queues(id) ON DELETE CASCADE;

--
-- Name: trace_names trace_names_partition_trace_fkey; Type: FK CONSTRAINT; Schema: queen; Owner: -
--

ALTER TABLE ONLY queen.trace_names
    ADD CONSTRAINT trace_names_partition_trace_fkey FOREIGN KEY (partition_id, trace_id) REFERENCES queen.traces(partition_id, id) ON DELETE CASCADE;

--
-- Name: trace_names trace_names_trace_id_fkey; Type: FK CONSTRAINT; Schema: queen; Owner: -
--

ALTER TABLE ONLY queen.trace_names
    ADD CONSTRAINT trace_names_trace_id_fkey FOREIGN KEY (trace_id) REFERENCES queen.traces(id) ON DELETE CASCADE;

--
-- Name: traces traces_partition_id_fkey; Type: FK CONSTRAINT; Schema: queen; Owner: -
--

ALTER TABLE ONLY queen.traces
    ADD CONSTRAINT traces_partition_id_fkey FOREIGN KEY (partition_id) REFERENCES queen.partitions(id) ON DELETE CASCADE;

--
-- Name: quota_budget quota_budget_tenant_fkey; Type: FK CONSTRAINT; Schema: queen_streams; Owner: -
--

ALTER TABLE ONLY queen_streams.quota_budget
    ADD CONSTRAINT quota_budget_tenant_fkey FOREIGN KEY (tenant) REFERENCES queen_streams.quota(tenant) ON DELETE CASCADE;

--
-- Name: quota_meter quota_meter_tenant_fkey; Type: FK CONSTRAINT; Schema: queen_streams; Owner: -
--

ALTER TABLE ONLY queen_streams.quota_meter
    ADD CONSTRAINT quota_meter_tenant_fkey FOREIGN KEY (tenant) REFERENCES queen_streams.quota(tenant) ON DELETE CASCADE;

--
-- Name: quota_refusals quota_refusals_tenant_fkey; Type: FK CONSTRAINT; Schema: queen_streams; Owner: -
--

ALTER TABLE ONLY queen_streams.quota_refusals
    ADD CONSTRAINT quota_refusals_tenant_fkey FOREIGN KEY (tenant) REFERENCES queen_streams.quota(tenant) ON DELETE CASCADE;

--
-- Name: savepoint_cursors savepoint_cursors_query_id_name_fkey; Type: FK CONSTRAINT; Schema: queen_streams; Owner: -
--

ALTER TABLE ONLY queen_streams.savepoint_cursors
    ADD CONSTRAINT savepoint_cursors_query_id_name_fkey FOREIGN KEY (query_id, name) REFERENCES queen_streams.savepoints(query_id, name) ON DELETE CASCADE;

--
-- Name: savepoint_state savepoint_state_query_id_name_fkey; Type: FK CONSTRAINT; Schema: queen_streams; Owner: -
--

ALTER TABLE ONLY queen_streams.savepoint_state
    ADD CONSTRAINT savepoint_state_query_id_name_fkey FOREIGN KEY (query_id, name) REFERENCES queen_streams.savepoints(query_id, name) ON DELETE CASCADE;

--
-- Name: savepoints savepoints_query_id_fkey; Type: FK CONSTRAINT; Schema: queen_streams; Owner: -
--

ALTER TABLE ONLY queen_streams.savepoints
    ADD CONSTRAINT savepoints_query_id_fkey FOREIGN KEY (query_id) REFERENCES queen_streams.queries(id) ON DELETE CASCADE;

--
-- Name: sink_writes sink_writes_query_id_fkey; Type: FK CONSTRAINT; Schema: queen_streams; Owner: -
--

ALTER TABLE ONLY queen_streams.sink_writes
    ADD CONSTRAINT sink_writes_query_id_fkey FOREIGN KEY (query_id) REFERENCES queen_streams.queries(id) ON DELETE CASCADE;

--
-- Name: state state_query_id_fkey; Type: FK CONSTRAINT; Schema: queen_streams; Owner: -
--

ALTER TABLE ONLY queen_streams.state
    ADD CONSTRAINT state_query_id_fkey FOREIGN KEY (query_id) REFERENCES queen_streams.queries(id) ON DELETE CASCADE;

--
-- Name: state_rows state_rows_query_id_fkey; Type: FK CONSTRAINT; Schema: queen_streams; Owner: -
--

ALTER TABLE ONLY queen_streams.state_rows
    ADD CONSTRAINT state_rows_query_id_fkey FOREIGN KEY (query_id) REFERENCES queen_streams.queries(id) ON DELETE CASCADE;
