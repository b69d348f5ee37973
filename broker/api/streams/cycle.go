package streams

import (
	"bytes"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/regent-mq/regent/broker/api/auth"
	"github.com/regent-mq/regent/broker/api/httpx"
	"github.com/regent-mq/regent/broker/api/queue"
	"github.com/regent-mq/regent/broker/api/streams/wire"
	"github.com/regent-mq/regent/broker/domain/catalog"
	"github.com/regent-mq/regent/broker/domain/commit"
	"github.com/regent-mq/regent/broker/domain/counters"
	"github.com/regent-mq/regent/broker/domain/ids"
	"github.com/regent-mq/regent/broker/domain/produce"
	"github.com/regent-mq/regent/broker/domain/queuestore"
	"github.com/regent-mq/regent/broker/domain/quota"
	"github.com/regent-mq/regent/broker/metrics"
	"github.com/regent-mq/regent/broker/pg/db"
	"github.com/regent-mq/regent/broker/tracing"
)

// cycleResponse is the cycle's answer, written by hand.
type cycleResponse wire.CycleResponse

// appendJSON appends r as encoding/json would write it: on this hot path
// reflection cost more than the rest of the answer.
func (r *cycleResponse) appendJSON(b []byte) []byte { return append(r.appendFields(b), '}') }

// appendFields appends r without its closing brace, and without
// StateUpdatedAt and Next, which only writeNext writes.
func (r *cycleResponse) appendFields(b []byte) []byte {
	b = append(b, `{"success":`...)
	b = strconv.AppendBool(b, r.Success)
	if r.Error != "" {
		b = append(b, `,"error":`...)
		b = httpx.AppendString(b, r.Error)
	}
	if r.Deferred != "" {
		b = append(b, `,"deferred":`...)
		b = httpx.AppendString(b, r.Deferred)
	}
	b = append(b, `,"query_id":`...)
	b = httpx.AppendUUID(b, r.QueryID)
	b = append(b, `,"partition_id":`...)
	b = httpx.AppendUUID(b, r.PartitionID)
	b = append(b, `,"queueName":`...)
	b = httpx.AppendOptionalString(b, r.QueueName)
	b = append(b, `,"state_ops_applied":`...)
	b = strconv.AppendInt(b, int64(r.StateOpsApplied), 10)
	b = append(b, `,"push_results":`...)
	if r.PushResults == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i := range r.PushResults {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendPushResult(b, &r.PushResults[i])
		}
		b = append(b, ']')
	}
	b = append(b, `,"ack_result":`...)
	if a := r.AckResult; a == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, `{"success":`...)
		b = strconv.AppendBool(b, a.Success)
		b = append(b, `,"count":`...)
		b = strconv.AppendInt(b, a.Count, 10)
		b = append(b, `,"lease_released":`...)
		b = strconv.AppendBool(b, a.LeaseReleased)
		b = append(b, `,"dlq":`...)
		b = strconv.AppendBool(b, a.DLQ)
		b = append(b, '}')
	}
	return b
}

// write answers the cycle with r, with status 200: a refusal by the rules
// is success false in the body.
func (r *cycleResponse) write(w http.ResponseWriter) { r.writeStatus(w, http.StatusOK) }

func (r *cycleResponse) writeStatus(w http.ResponseWriter, status int) {
	httpx.WriteAppended(w, status, r.appendJSON)
}

// cycle is POST /streams/v1/cycle: one call of queen_streams.cycle_v7, whose
// rules are in broker/pg/migrate/functions/queen_streams.cycle_rules.sql: what its
// ack does to the cursor, the gate partial ack, and what keeps an idle flush
// beside folds exactly-once; and its table rows in queen_streams.cycle_table.
func (s *Service) cycle(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	var req wire.CycleRequest
	if err := httpx.ReadJSON(r, &req); err != nil {
		httpx.Fail(w, err)
		return
	}
	c, err := cycleFrom(&req)
	if err != nil {
		httpx.Fail(w, err)
		return
	}
	items, index, err := sinkItems(req.PushItems)
	if err != nil {
		httpx.Fail(w, err)
		return
	}
	id := auth.FromContext(r.Context())
	c.Tenant = id.Tenant
	if !s.ownPartition(w, r, c.Tenant, c.PartitionID) {
		return
	}
	if c.Next != nil {
		c.Next.MaxBytes = s.consumers.MaxPopBytes()
		if s.quotas.AdmitPop(c.Tenant) != nil {
			// Past the tenant's pop rate the cycle claims nothing: the
			// answer's next is null, and the worker pops, which waits.
			c.Next.Batch = 0
		}
	}
	if c.Ops.Refusal != "" {
		// The ops break the rules, so the cycle fails.
		s.refuseOwned(w, r, &c, c.Ops.Refusal, start)
		return
	}
	// What the cycle emits continues its trace.
	e, err := s.producer.Emit(r.Context(), produce.Write{Tenant: c.Tenant, Sub: id.Subject, Items: items,
		Traceparent: tracing.Carried(r.Context(), r.Header.Get(tracing.Header)), Cycle: &c})
	if err != nil {
		s.notEmitted(w, r, &c, err, start)
		return
	}
	res := e.Cycle
	s.metrics.Ops.Cycle(c.Tenant, c.QueryID, false)
	s.metrics.StateOps.WithLabelValues(c.Tenant, "upsert").Add(float64(len(c.Ops.UpsertKeys)))
	s.metrics.StateOps.WithLabelValues(c.Tenant, "delete").Add(float64(len(c.Ops.DeleteKeys)))

	// The cycle committed: the bookkeeping of the push and ack routes is
	// done here, counters and the announcements that make the sink emits
	// and the released source visible to the pops of every replica.
	s.after.Apply(e.After)
	resp := cycleResponse{Success: true, QueryID: c.QueryID, PartitionID: c.PartitionID,
		QueueName: &res.QueueName, StateOpsApplied: c.Ops.Applied, PushResults: pushResults(req.PushItems, index, e.Pushed)}
	if c.Ack != nil {
		resp.AckResult = &wire.AckResult{Success: true, Count: res.AckCount, LeaseReleased: res.LeaseReleased}
		if c.Ack.OK && res.AckCount > 0 {
			s.metrics.Acked.WithLabelValues(c.Tenant, res.QueueName).Add(float64(res.AckCount))
			s.metrics.Ops.Add(c.Tenant, res.QueueName, counters.AckRequests, 1)
			s.metrics.Ops.Add(c.Tenant, res.QueueName, counters.AckSuccess, int64(res.AckCount))
		}
	}
	if c.Next == nil {
		resp.write(w)
	} else {
		s.writeNext(w, r, &c, &res, &resp)
	}
	s.metrics.Cycle(c.Tenant, c.QueryID.String(), metrics.CycleCommitted, time.Since(start))
}

// writeNext answers a committed cycle that asked for the next batch
// (next_batch) with it, in the pop's answer, or null when the partition
// had none: the lease is then released. A batch claimed but not
// delivered (its frames all deleted, or not decoded) was released by
// Claimed, and the cycle, which committed, is answered without it.
func (s *Service) writeNext(w http.ResponseWriter, r *http.Request, c *db.Cycle, res *db.CycleResult, resp *cycleResponse) {
	var msgs []queuestore.Message
	claim := res.Next
	if claim != nil {
		var err error
		msgs, claim, err = s.consumers.Claimed(r.Context(), c.Tenant, res.QueueName, c.Group, claim, c.Next.LeaseID)
		if err != nil {
			s.log.Error("a cycle's next batch was claimed and could not be delivered; released", "partition", c.PartitionID, "err", err)
			claim = nil
		}
	}
	if claim == nil {
		resp.AckResult.LeaseReleased = true
	} else if tracing.Enabled() {
		for i := range msgs {
			tracing.Link(r.Context(), msgs[i].Traceparent)
		}
	}
	httpx.WriteStreamed(w, http.StatusOK, func(st *httpx.Stream, b []byte) []byte {
		b = resp.appendFields(b)
		b = append(b, `,"state_updated_at":"`...)
		b = res.StateAt.UTC().AppendFormat(b, httpx.TimeFormat)
		b = append(b, `","next":`...)
		if claim == nil {
			b = append(b, "null"...)
		} else {
			b = queue.AppendPop(st, b, res.QueueName, c.Group, msgs, []db.PopClaim{*claim}, c.Next.LeaseID.String())
		}
		return append(b, '}')
	})
}

// notEmitted answers a cycle that Emit did not commit. Its own function:
// the targets of errors.As escape, and the committed cycle does not pay
// for them.
func (s *Service) notEmitted(w http.ResponseWriter, r *http.Request, c *db.Cycle, err error, start time.Time) {
	var bad *catalog.BadName
	var over *quota.Refusal
	switch {
	case errors.As(err, &bad):
		httpx.Fail(w, httpx.BadRequest("%s", bad.Message))
	case errors.As(err, &over) && over.Quota == quota.MaxStoredBytes:
		// Past maxStoredBytes the cycle fails as a whole, as past
		// maxStateRows.
		s.refuseOwned(w, r, c, over.Message, start)
	default:
		s.refuseOrFail(w, r, c, err, start)
	}
}

// refuseOwned fails a cycle that breaks a rule the broker checks before the
// database, for why; but the ownership verdicts come first, whatever the
// rule says.
func (s *Service) refuseOwned(w http.ResponseWriter, r *http.Request, c *db.Cycle, why string, start time.Time) {
	err := s.db.CheckOwner(r.Context(), c.Tenant, c.QueryID, c.PartitionID)
	if err == nil {
		err = &db.Failure{Message: why}
	}
	s.refuseOrFail(w, r, c, err, start)
}

// refuseOrFail answers a cycle that did not commit: a refusal by the rules
// is a 200 with success false, anything else an error status.
func (s *Service) refuseOrFail(w http.ResponseWriter, r *http.Request, c *db.Cycle, err error, start time.Time) {
	var refused *db.Failure
	if errors.As(err, &refused) {
		if reason, ok := refused.Deferred(); ok {
			s.deferFlush(w, r, c, refused.Message, reason, start)
			return
		}
		s.metrics.Ops.Cycle(c.Tenant, c.QueryID, true)
		if q := quota.InSQL(refused.Code); q != "" {
			s.quotas.Refused(c.Tenant, q, refused.Message)
		}
		status := http.StatusOK
		switch refused.Code {
		case db.StaleGeneration:
			// The registration's 409, for the same reason: old accumulators
			// and a new fold shape do not mix. A worker must stop, not
			// retry: its registration is no longer the query's.
			status = http.StatusConflict
		case db.SinkRows, db.NoSinkTable:
			// Table rows are Regent's extension, and rows that do not fit
			// are bad input, not a rule of the seed's cycle.
			status = http.StatusBadRequest
		}
		(&cycleResponse{QueryID: c.QueryID, PartitionID: c.PartitionID,
			Error: refused.Message, PushResults: []wire.PushResult{}}).writeStatus(w, status)
		s.metrics.Cycle(c.Tenant, c.QueryID.String(), metrics.CycleRefused, time.Since(start))
		return
	}
	s.fail(w, r, err)
	s.metrics.Cycle(c.Tenant, c.QueryID.String(), metrics.CycleFailed, time.Since(start))
}

// deferFlush answers an idle flush the rules deferred: a success that
// applied nothing, and says why. It is no refusal: a stock worker counts
// every success false as an error, and loses nothing by a flush not
// applied, since it reads the ripe windows again at its next flush.
//
// The flush held the partition's cursor row locked while the rules were
// checked, and a pop that found it locked skipped the partition, as beside
// a committed flush: unless a lease holder will announce it when it acks,
// the partition is announced again, so that what it holds is not left
// waiting for the next reseed.
func (s *Service) deferFlush(w http.ResponseWriter, r *http.Request, c *db.Cycle, why, reason string, start time.Time) {
	s.metrics.Ops.Cycle(c.Tenant, c.QueryID, false)
	s.metrics.FlushDeferred.WithLabelValues(c.Tenant, reason).Inc()
	(&cycleResponse{Success: true, Deferred: why, QueryID: c.QueryID, PartitionID: c.PartitionID,
		PushResults: []wire.PushResult{}}).write(w)
	s.metrics.Cycle(c.Tenant, c.QueryID.String(), metrics.CycleDeferred, time.Since(start))
	if reason == db.DeferredLeased {
		return
	}
	p, err := s.catalog.OwnedPartition(r.Context(), c.Tenant, c.PartitionID)
	if err != nil {
		s.log.Warn("a deferred flush's partition was not announced again", "partition", c.PartitionID, "err", err)
		return
	}
	s.after.Apply(commit.After{Announce: []commit.Partition{{Queue: p.Queue.ID, Partition: c.PartitionID}}})
}

// cycleFrom checks a cycle request and applies the defaults.
func cycleFrom(req *wire.CycleRequest) (db.Cycle, error) {
	var c db.Cycle
	var err error
	if c.QueryID, err = parseID("query_id", req.QueryID); err != nil {
		return c, err
	}
	if c.PartitionID, err = parseID("partition_id", req.PartitionID); err != nil {
		return c, err
	}
	if err := httpx.CheckText("consumer_group", req.ConsumerGroup); err != nil {
		return c, err
	}
	c.Group = req.ConsumerGroup
	if c.Group == "" {
		c.Group = catalog.QueueMode
	}
	if c.Ops, err = foldStateOps(req.StateOps, req.Ack == nil); err != nil {
		return c, err
	}
	if g := req.ResetGeneration; g != nil && *g < 0 {
		return c, httpx.BadRequest("reset_generation must not be negative")
	}
	c.Generation = req.ResetGeneration
	if rows := bytes.TrimSpace(req.TableRows); len(rows) > 0 && !bytes.Equal(rows, []byte("null")) {
		if rows[0] != '[' {
			return c, httpx.BadRequest("table_rows must be an array of objects, one per row")
		}
		c.TableRows = rows
	}
	if a := req.Ack; a != nil {
		ack := &db.Ack{OK: db.CycleAckOK(a.Status), Count: a.Count, Release: req.ReleaseLease == nil || *req.ReleaseLease}
		if a.LeaseID != "" {
			id, err := uuid.Parse(a.LeaseID)
			if err != nil {
				return c, httpx.NotUUID("ack.leaseId", a.LeaseID)
			}
			ack.LeaseID = &id
		}
		if a.Count != nil && *a.Count < 0 {
			return c, httpx.BadRequest("ack.count must not be negative")
		}
		c.Ack = ack
	}
	if n := req.NextBatch; n != nil {
		if *n < 1 || *n > queue.MaxBatch {
			return c, httpx.BadRequest("next_batch must be an integer from 1 to %d", queue.MaxBatch)
		}
		if c.Ack == nil || !c.Ack.OK || !c.Ack.Release {
			return c, httpx.BadRequest("next_batch needs a success ack of the whole batch (release_lease not false)")
		}
		c.Next = &db.Next{LeaseID: ids.New(), Batch: *n}
	}
	return c, nil
}
