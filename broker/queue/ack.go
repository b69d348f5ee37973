package queue

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/regent-mq/regent/broker/auth"
	"github.com/regent-mq/regent/broker/httpx"
	"github.com/regent-mq/regent/broker/segment"
)

// Ack is one acknowledgement.
type Ack struct {
	PartitionID   uuid.UUID
	TransactionID string
	Status        string      // completed, failed, dlq or retry
	LeaseID       pgtype.UUID // optional
	Group         string
	Error         *string // kept with a dead letter
}

// AckResult is the outcome of one Ack, as the wire shows it.
type AckResult struct {
	Index         int     `json:"index"`
	TransactionID string  `json:"transactionId"`
	Success       bool    `json:"success"`
	Error         *string `json:"error"`
	QueueName     *string `json:"queueName"`
	PartitionName *string `json:"partitionName"`
	LeaseReleased bool    `json:"leaseReleased"`
	DLQ           bool    `json:"dlq"`
	queueID       uuid.UUID
	// announce: the release left data to deliver, and the database left
	// announcing it to the broker (see AfterAck).
	announce bool
}

// Querier runs queries on a pool or in a transaction.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// wireAck is an acknowledgement as a client sends it.
type wireAck struct {
	TransactionID *string `json:"transactionId"`
	PartitionID   *string `json:"partitionId"`
	Status        *string `json:"status"`
	LeaseID       *string `json:"leaseId"`
	ConsumerGroup *string `json:"consumerGroup"`
	Error         *string `json:"error"`
}

// parse validates a wire ack; field names the element in messages.
func (a *wireAck) parse(field, group string) (Ack, error) {
	var out Ack
	if a.TransactionID == nil || *a.TransactionID == "" {
		return out, httpx.BadRequest("%stransactionId is required", field)
	}
	if a.PartitionID == nil || *a.PartitionID == "" {
		return out, httpx.BadRequest("%spartitionId is required", field)
	}
	pid, err := uuid.Parse(*a.PartitionID)
	if err != nil {
		return out, httpx.NotUUID(field+"partitionId", *a.PartitionID)
	}
	out = Ack{PartitionID: pid, TransactionID: *a.TransactionID, Status: "completed", Group: group, Error: a.Error}
	if a.Status != nil {
		switch *a.Status {
		case "completed", "success":
		case "failed", "dlq", "retry":
			out.Status = *a.Status
		default:
			return out, httpx.BadRequest("%sstatus must be completed, success, failed, dlq or retry, not %q", field, *a.Status)
		}
	}
	if a.LeaseID != nil && *a.LeaseID != "" {
		id, err := uuid.Parse(*a.LeaseID)
		if err != nil {
			return out, httpx.NotUUID(field+"leaseId", *a.LeaseID)
		}
		out.LeaseID = pgtype.UUID{Bytes: id, Valid: true}
	}
	if a.ConsumerGroup != nil && *a.ConsumerGroup != "" {
		out.Group = *a.ConsumerGroup
	}
	return out, nil
}

// deadLetters are the frames the ack procedure asked for, by item (1-based).
type deadLetters struct {
	items    []int32
	ids      []uuid.UUID
	payloads [][]byte
	keys     []pgtype.Int8
	created  []time.Time
}

// Ack applies acks in order in one procedure call (on db, a pool or a
// transaction). A dead letter needs its frame decoded here: that rare path
// costs one more query and one more call per message sent to the dead
// letters. Once the acks have committed, the caller passes them and their
// results to AfterAck.
func (s *Store) Ack(ctx context.Context, db Querier, tenant string, acks []Ack) ([]AckResult, error) {
	var out []AckResult
	var err error
	if oneCursorCompleted(acks) {
		out, err = s.ackCursor(ctx, db, tenant, acks)
	} else {
		out, err = s.ackEach(ctx, db, tenant, acks)
	}
	if err != nil {
		return nil, err
	}
	acked := map[string]int{}
	for i, r := range out {
		if r.Success && r.QueueName != nil && acks[i].Status == "completed" {
			acked[*r.QueueName]++
		}
	}
	for q, n := range acked {
		s.metrics.Acked.WithLabelValues(tenant, q).Add(float64(n))
	}
	return out, nil
}

// AfterAck does what acks leave to do once they have committed: each
// release marks its partition in this replica's hot list at once (the
// consumer that acked usually pops again at once), and a release that left
// data to deliver is announced to every replica.
func (s *Store) AfterAck(acks []Ack, out []AckResult) {
	for i, r := range out {
		switch {
		case r.announce:
			s.Announce(r.queueID, acks[i].PartitionID)
		case r.Success && r.LeaseReleased && r.queueID != uuid.Nil:
			s.hot.Mark(r.queueID, acks[i].PartitionID)
		}
	}
}

// oneCursorCompleted reports the common case: a consumer acknowledging what
// it popped, all 'completed', on one partition and group, under one lease.
func oneCursorCompleted(acks []Ack) bool {
	for _, a := range acks {
		if a.Status != "completed" || a.PartitionID != acks[0].PartitionID || a.Group != acks[0].Group || a.LeaseID != acks[0].LeaseID {
			return false
		}
	}
	return len(acks) > 0
}

// ackCursor is the common case in queen.ack_cursor, which moves the
// cursor and returns what each item's answer is derived from here, by the
// rules of queen.ack: a message behind the cursor is already
// acknowledged; otherwise the lease must be held (and match, when given),
// and the cursor moves just past it; reaching the end of the batch releases
// the lease. Doing this item by item in PL/pgSQL cost the database twice as
// much as the rest of the ack.
func (s *Store) ackCursor(ctx context.Context, db Querier, tenant string, acks []Ack) ([]AckResult, error) {
	txids := make([]string, len(acks))
	for i, a := range acks {
		txids[i] = a.TransactionID
	}
	var (
		qid           uuid.UUID
		qname, pname  string
		offsets       []pgtype.Int8
		committed     int64
		batchEnd      pgtype.Int8
		held, leaseOK bool
		announce      bool
		lease         [16]byte
	)
	if acks[0].LeaseID.Valid {
		lease = acks[0].LeaseID.Bytes
	}
	err := db.QueryRow(ctx, `SELECT queue_id, queue_name, partition_name, offsets, committed, batch_end, lease_held, lease_ok, announce
		FROM queen.ack_cursor($1, $2, $3, $4, $5)`, tenant, pgUUID(acks[0].PartitionID), acks[0].Group, lease, txids).
		Scan(&qid, &qname, &pname, &offsets, &committed, &batchEnd, &held, &leaseOK, &announce)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("ack: %w", err)
	}
	moves := held && leaseOK
	out := make([]AckResult, len(acks))
	for i, a := range acks {
		r := &out[i]
		r.Index, r.TransactionID = i, a.TransactionID
		if i >= len(offsets) || !offsets[i].Valid {
			r.Error = &msgNotFound
			continue
		}
		r.QueueName, r.PartitionName, r.queueID = &qname, &pname, qid
		switch o := offsets[i].Int64; {
		case o < committed:
			r.Success = true
		case moves:
			committed = o + 1
			r.Success = true
		default:
			r.Error = &leaseInvalid
			continue
		}
		r.LeaseReleased = !held || committed >= batchEnd.Int64
		r.announce = announce && r.LeaseReleased
	}
	return out, nil
}

var (
	msgNotFound  = "Message not found"
	leaseInvalid = "Invalid or expired lease"
)

// ackEach runs queen.ack, item by item in the database, for any mix of
// statuses and cursors.
func (s *Store) ackEach(ctx context.Context, db Querier, tenant string, acks []Ack) ([]AckResult, error) {
	n := len(acks)
	pids := make([][16]byte, n)
	groups := make([]string, n)
	txids := make([]string, n)
	statuses := make([]string, n)
	// No lease is the zero id and no error text is "": slices of plain
	// values encode without reflection, which NULL elements would need.
	leases := make([][16]byte, n)
	errs := make([]string, n)
	for i, a := range acks {
		pids[i], groups[i], txids[i], statuses[i] = pgUUID(a.PartitionID), a.Group, a.TransactionID, a.Status
		if a.LeaseID.Valid {
			leases[i] = a.LeaseID.Bytes
		}
		if a.Error != nil {
			errs[i] = *a.Error
		}
	}
	var dl deadLetters
	for gone := ""; ; {
		var out []AckResult
		var err error
		call := func(db Querier) error {
			out, err = s.ackOnce(ctx, db, tenant, txids, pids, groups, statuses, leases, errs, &dl)
			return err
		}
		if tx, ok := db.(pgx.Tx); ok {
			// In a transaction a failed call aborts it: a savepoint keeps
			// the dead-letter retry possible.
			err = pgx.BeginFunc(ctx, tx, func(sp pgx.Tx) error { return call(sp) })
		} else {
			err = call(db)
		}
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "RG001" {
			return out, err
		}
		err = s.addDeadLetter(ctx, db, pgErr.Detail, &dl)
		switch {
		case errors.Is(err, errFrameGone) && pgErr.Detail != gone:
			// Retention removed the message after the call named it: the
			// call again answers that item "Message not found".
			gone = pgErr.Detail
		case err != nil:
			return nil, err
		}
	}
}

// errFrameGone is a dead letter whose message no segment holds any more.
var errFrameGone = errors.New("the message is no longer stored")

func (s *Store) ackOnce(ctx context.Context, db Querier, tenant string, txids []string, pids [][16]byte, groups, statuses []string,
	leases [][16]byte, errs []string, dl *deadLetters) ([]AckResult, error) {
	rows, err := db.Query(ctx, `SELECT item, queue_id, success, error, queue_name, partition_name, lease_released, dlq, announce
		FROM queen.ack($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`,
		tenant, pids, groups, txids, statuses, leases, errs, dl.items, pgUUIDs(dl.ids), dl.payloads, dl.keys, dl.created)
	if err != nil {
		return nil, fmt.Errorf("ack: %w", err)
	}
	out := make([]AckResult, len(txids))
	for rows.Next() {
		var item int
		var qid pgtype.UUID
		var r AckResult
		var announce bool
		if err := rows.Scan(&item, &qid, &r.Success, &r.Error, &r.QueueName, &r.PartitionName, &r.LeaseReleased, &r.DLQ, &announce); err != nil {
			rows.Close()
			return nil, fmt.Errorf("ack: %w", err)
		}
		if announce { // after the item's own answer: its cursor's release left data
			out[item-1].announce = true
			continue
		}
		r.Index = item - 1
		r.TransactionID = txids[r.Index]
		if qid.Valid {
			r.queueID = qid.Bytes
		}
		out[r.Index] = r
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("ack: %w", err)
	}
	return out, nil
}

// addDeadLetter decodes the frame named by an RG001 detail
// ("item:partition_id:offset") and adds it to dl.
func (s *Store) addDeadLetter(ctx context.Context, db Querier, detail string, dl *deadLetters) error {
	parts := strings.SplitN(detail, ":", 3)
	if len(parts) != 3 {
		return fmt.Errorf("ack: malformed dead letter request %q", detail)
	}
	item, err1 := strconv.Atoi(parts[0])
	pid, err2 := uuid.Parse(parts[1])
	off, err3 := strconv.ParseInt(parts[2], 10, 64)
	if err := errors.Join(err1, err2, err3); err != nil {
		return fmt.Errorf("ack: malformed dead letter request %q: %w", detail, err)
	}
	var base int64
	var count int
	var body []byte
	var sum int64
	err := db.QueryRow(ctx, `SELECT base_offset, frame_count, body, checksum FROM queen.log_segments
		WHERE partition_id = $1 AND base_offset <= $2 ORDER BY base_offset DESC LIMIT 1`, pid, off).
		Scan(&base, &count, &body, &sum)
	if errors.Is(err, pgx.ErrNoRows) || err == nil && off >= base+int64(count) {
		return fmt.Errorf("ack: dead letter (partition %s offset %d): %w", pid, off, errFrameGone)
	}
	if err != nil {
		return fmt.Errorf("ack: read the segment of a dead letter: %w", err)
	}
	frames, err := segment.Decode(body, uint64(sum), count)
	if err != nil || off-base >= int64(len(frames)) {
		return fmt.Errorf("ack: decode the segment of a dead letter (partition %s offset %d): %w", pid, off, err)
	}
	f := &frames[off-base]
	var key pgtype.Int8
	if f.Sealed() {
		key = pgtype.Int8{Int64: int64(f.KeyID), Valid: true}
	}
	dl.items = append(dl.items, int32(item))
	dl.ids = append(dl.ids, f.ID)
	dl.payloads = append(dl.payloads, f.Payload)
	dl.keys = append(dl.keys, key)
	dl.created = append(dl.created, time.UnixMicro(f.CreatedAt))
	return nil
}

// handleAck is POST /api/v1/ack.
func (s *Store) handleAck(w http.ResponseWriter, r *http.Request) {
	var body wireAck
	if err := httpx.ReadJSON(r, &body); err != nil {
		httpx.Fail(w, err)
		return
	}
	a, err := body.parse("", QueueMode)
	if err != nil {
		httpx.Fail(w, err)
		return
	}
	acks := []Ack{a}
	out, err := s.Ack(r.Context(), s.pool, auth.FromContext(r.Context()).Tenant, acks)
	if err != nil {
		s.fail(w, r, "ack", err)
		return
	}
	s.AfterAck(acks, out)
	httpx.WriteJSON(w, http.StatusOK, out)
}

// handleAckBatch is POST /api/v1/ack/batch: every acknowledgement in one
// procedure call, results in request order.
func (s *Store) handleAckBatch(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Acks          *[]wireAck `json:"acknowledgments"`
		ConsumerGroup *string    `json:"consumerGroup"`
	}
	if err := httpx.ReadJSON(r, &body); err != nil {
		httpx.Fail(w, err)
		return
	}
	if body.Acks == nil {
		httpx.Fail(w, httpx.BadRequest("acknowledgments must be an array"))
		return
	}
	group := QueueMode
	if body.ConsumerGroup != nil && *body.ConsumerGroup != "" {
		group = *body.ConsumerGroup
	}
	acks := make([]Ack, len(*body.Acks))
	for i := range *body.Acks {
		a, err := (*body.Acks)[i].parse(fmt.Sprintf("acknowledgments[%d].", i), group)
		if err != nil {
			httpx.Fail(w, err)
			return
		}
		if body.ConsumerGroup != nil && *body.ConsumerGroup != "" {
			a.Group = group // a top-level group applies to all
		}
		acks[i] = a
	}
	if len(acks) == 0 {
		httpx.WriteJSON(w, http.StatusOK, []AckResult{})
		return
	}
	out, err := s.Ack(r.Context(), s.pool, auth.FromContext(r.Context()).Tenant, acks)
	if err != nil {
		s.fail(w, r, "ack batch", err)
		return
	}
	s.AfterAck(acks, out)
	httpx.WriteJSON(w, http.StatusOK, out)
}
