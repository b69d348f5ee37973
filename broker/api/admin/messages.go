package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/regent-mq/regent/broker/api/httpx"
	"github.com/regent-mq/regent/broker/domain/catalog"
	"github.com/regent-mq/regent/broker/domain/segment"
	"github.com/regent-mq/regent/broker/pg/db"
)

// endOfTime is later than any message.
var endOfTime = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)

// Bounds of a listing's work. A listing reads segments newest first in
// chunks and stops once it holds offset+limit messages newer than the next
// segment, so a dashboard's page costs the newest few segments of its
// window. A status filter that matches little reads further, up to
// maxListSegments segments: past them the page holds what they held.
const (
	listChunk       = 32
	maxChunk        = 128
	maxListSegments = 4096
	maxListLimit    = 1000
	maxListOffset   = 10000
	maxSlice        = 100 * 365 * 24 * time.Hour
)

// item is a listed message: its frame, offset and segment.
type item struct {
	seg   *db.StoredSegment
	frame segment.Frame
	off   int64
	st    status
}

// status is a message's computed status (queue-admin-api.md §2).
type status struct {
	status, queue           string
	consumedBy, totalGroups int
	leaseExpiresAt          *time.Time
}

// statusOf applies §2's rules to the message at off, given its partition's
// cursors and whether it has a dead-letter entry. Processing is limited to
// the leased batch, as the Regent note allows.
func statusOf(off int64, cursors []db.CursorState, dead bool) status {
	st := status{status: "pending", queue: "pending"}
	var qm *db.CursorState
	for i := range cursors {
		c := &cursors[i]
		if c.Group == catalog.QueueMode {
			qm = c
			continue
		}
		st.totalGroups++
		if c.Committed > off {
			st.consumedBy++
		}
	}
	if qm != nil && qm.LeaseLive {
		st.leaseExpiresAt = qm.LeaseExpiresAt
	}
	switch {
	case dead:
		st.status, st.queue = "dead_letter", "dead_letter"
	case qm != nil:
		switch {
		case qm.Committed > off:
			st.queue = "completed"
		case qm.LeaseLive && qm.BatchStart != nil && *qm.BatchStart <= off && off < *qm.BatchEnd:
			st.queue = "processing"
		}
		st.status = st.queue
	case st.totalGroups > 0 && st.consumedBy == st.totalGroups:
		st.status = "completed"
	}
	return st
}

// list reads the tenant's messages in w, newest first (createdAt, then id),
// keeping those keep accepts, until it holds want of them or the window
// runs out (see maxListSegments). It reads the window backwards in slices
// of segments' newest frames, a minute first and each next one twice as
// long, so that a call sorts only the segments of its slice however long
// the window is.
func (a *API) list(ctx context.Context, tenant string, w db.SegmentFilter, want int, keep func(*item) bool) ([]item, error) {
	var out []item
	var after *db.StoredSegmentKey
	width := time.Minute
	// Nothing is newer than now but what a replica's clock skew makes so:
	// the first slice reaches to the end of time.
	hi, lo := endOfTime, time.Now().Add(-width)
	if w.To.Before(lo) {
		lo = w.To.Add(-width)
	}
	for read := 0; read < maxListSegments; {
		if lo.Before(w.From) {
			lo = w.From
		}
		// Enough segments for the page when each holds a message to keep,
		// within bounds: a segment may hold many.
		n := min(max(want-len(out), listChunk), maxChunk)
		segs, err := a.store.StoredSegments(ctx, tenant, w, lo, hi, after, n)
		if err != nil {
			return nil, err
		}
		read += len(segs)
		var chunk []item
		var parts, ids []uuid.UUID
		for i := range segs {
			g := &segs[i]
			frames, err := segment.Decode(g.Body, uint64(g.Checksum), g.Frames)
			if err != nil {
				return nil, err
			}
			g.Body = nil
			parts = append(parts, g.PartitionID)
			for j := range frames {
				f := frames[j]
				at := time.UnixMicro(f.CreatedAt)
				if f.Deleted() || g.Base+int64(j) < g.Floor || at.Before(w.From) || !at.Before(w.To) {
					continue
				}
				f.Payload = nil // never listed
				chunk = append(chunk, item{seg: g, frame: f, off: g.Base + int64(j)})
				ids = append(ids, f.ID)
			}
		}
		if len(chunk) > 0 {
			cursors, err := a.store.CursorStates(ctx, parts)
			if err != nil {
				return nil, err
			}
			dead, err := a.store.DeadLettered(ctx, parts, ids)
			if err != nil {
				return nil, err
			}
			for i := range chunk {
				it := &chunk[i]
				_, isDead := dead[it.frame.ID]
				it.st = statusOf(it.off, cursors[it.seg.PartitionID], isDead)
				if keep(it) {
					out = append(out, *it)
				}
			}
		}
		slices.SortFunc(out, func(x, y item) int {
			if x.frame.CreatedAt != y.frame.CreatedAt {
				return int(y.frame.CreatedAt - x.frame.CreatedAt)
			}
			return bytes.Compare(y.frame.ID[:], x.frame.ID[:])
		})
		// Every later segment holds only frames no newer than its own
		// newest, which is at most bound.
		var bound time.Time
		if len(segs) < n { // the slice is read: on to the next
			if !lo.After(w.From) {
				break
			}
			bound, hi, after = lo, lo, nil
			width = min(2*width, maxSlice)
			lo = hi.Add(-width)
		} else {
			// A later segment of the slice may tie with this one.
			last := segs[len(segs)-1].Key()
			bound, after = last.MaxCreatedAt.Add(time.Microsecond), &last
		}
		newer := 0
		for newer < len(out) && out[newer].frame.CreatedAt >= bound.UnixMicro() {
			newer++
		}
		if newer >= want {
			break
		}
	}
	return out, nil
}

// listPage lists the page that the limit (defLimit) and offset parameters
// ask for.
func (a *API) listPage(r *http.Request, where db.SegmentFilter, defLimit int, keep func(*item) bool) ([]item, error) {
	limit := min(intQuery(r, "limit", defLimit), maxListLimit)
	offset := min(intQuery(r, "offset", 0), maxListOffset)
	items, err := a.list(r.Context(), tenant(r), where, offset+limit, keep)
	if err != nil || offset >= len(items) {
		return nil, err
	}
	return items[offset:min(offset+limit, len(items))], nil
}

// handleMessages is GET /api/v1/messages.
func (a *API) handleMessages(w http.ResponseWriter, r *http.Request) {
	from, to, err := rangeQuery(r)
	if err != nil {
		httpx.Fail(w, err)
		return
	}
	// As Queen does: to is rounded up to the end of its minute, excluded.
	to = to.Truncate(time.Minute).Add(time.Minute)
	names, err := textQueries(r, "queue", "partition", "ns", "task")
	if err != nil {
		httpx.Fail(w, err)
		return
	}
	where := db.SegmentFilter{Queue: names[0], Partition: names[1], Namespace: names[2], Task: names[3], From: from, To: to}
	want := r.URL.Query().Get("status")
	items, err := a.listPage(r, where, 200, func(it *item) bool { return want == "" || it.st.status == want })
	if err != nil {
		a.fail(w, r, err)
		return
	}
	hasQM, groups, err := a.store.ConsumptionModes(r.Context(), tenant(r), where.Queue)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	out := make([]map[string]any, 0, len(items))
	for _, it := range items {
		m := messageFields(&it)
		m["namespace"], m["task"] = it.seg.Namespace, it.seg.Task
		m["status"], m["queueStatus"] = it.st.status, it.st.queue
		m["busStatus"] = map[string]int{"consumedBy": it.st.consumedBy, "totalGroups": it.st.totalGroups}
		m["traceId"], m["producerSub"] = optional(it.frame.TraceID), optional(it.frame.ProducerSub)
		m["queuePriority"] = it.seg.Priority
		m["leaseExpiresAt"] = instant(it.st.leaseExpiresAt)
		out = append(out, m)
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"messages": out, "mode": mode(hasQM, groups)})
}

// handleQueueMessages is GET /api/v1/status/queues/{queue}/messages: a bare
// array of the queue's messages, newest first, with queue-mode statuses.
func (a *API) handleQueueMessages(w http.ResponseWriter, r *http.Request) {
	queue := r.PathValue("queue")
	if !isText(queue) {
		httpx.WriteJSON(w, http.StatusOK, []any{})
		return
	}
	where := db.SegmentFilter{Queue: &queue, From: time.Unix(0, 0), To: endOfTime}
	items, err := a.listPage(r, where, 50, func(*item) bool { return true })
	if err != nil {
		a.fail(w, r, err)
		return
	}
	out := make([]map[string]any, 0, len(items))
	for _, it := range items {
		m := messageFields(&it)
		m["status"] = it.st.queue
		out = append(out, m)
	}
	httpx.WriteJSON(w, http.StatusOK, out)
}

// messageFields are the fields every message answer starts with.
func messageFields(it *item) map[string]any {
	at := time.UnixMicro(it.frame.CreatedAt)
	return map[string]any{
		"id": it.frame.ID, "transactionId": it.frame.TransactionID, "partitionId": it.seg.PartitionID,
		"queuePath": it.seg.Queue + "/" + it.seg.Partition, "queue": it.seg.Queue, "partition": it.seg.Partition,
		"createdAt": instant(&at),
	}
}

// mode is the consumption mode of §2: queue mode, named groups, both or none.
func mode(hasQueueMode bool, groups int) map[string]any {
	t := "none"
	switch {
	case hasQueueMode && groups > 0:
		t = "hybrid"
	case hasQueueMode:
		t = "queue"
	case groups > 0:
		t = "bus"
	}
	return map[string]any{"hasQueueMode": hasQueueMode, "busGroupsCount": groups, "type": t}
}

// lookup finds the message a path names, decoded; nil when the tenant has
// none: a partition id that is not a UUID names nothing.
func (a *API) lookup(r *http.Request) (*db.FoundMessage, []segment.Frame, error) {
	// A path segment is never empty, so it never names a deleted frame,
	// whose transaction id is "".
	tx := r.PathValue("transactionId")
	pid, err := uuid.Parse(r.PathValue("partitionId"))
	if err != nil || !isText(tx) {
		return nil, nil, nil
	}
	f, err := a.store.FindMessage(r.Context(), tenant(r), pid, tx)
	if err != nil || f == nil {
		return nil, nil, err
	}
	frames, err := segment.Decode(f.Body, uint64(f.Checksum), f.Frames)
	if err != nil {
		return nil, nil, err
	}
	return f, frames, nil
}

// handleMessage is GET /api/v1/messages/{partitionId}/{transactionId}.
func (a *API) handleMessage(w http.ResponseWriter, r *http.Request) {
	f, frames, err := a.lookup(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if f == nil {
		httpx.WriteError(w, http.StatusNotFound, "Message not found")
		return
	}
	it := item{seg: &f.StoredSegment, frame: frames[f.Index], off: f.Base + int64(f.Index)}
	payload := it.frame.Payload
	if it.frame.Sealed() {
		if payload, err = a.sealer.Open(nil, payload, it.frame.KeyID); err != nil {
			a.fail(w, r, err)
			return
		}
	}
	cursors, err := a.store.CursorStates(r.Context(), []uuid.UUID{f.PartitionID})
	if err != nil {
		a.fail(w, r, err)
		return
	}
	dead, err := a.store.DeadLettered(r.Context(), []uuid.UUID{f.PartitionID}, []uuid.UUID{it.frame.ID})
	if err != nil {
		a.fail(w, r, err)
		return
	}
	dl, isDead := dead[it.frame.ID]
	cs := cursors[f.PartitionID]
	st := statusOf(it.off, cs, isDead)
	groups := make([]map[string]any, 0, len(cs))
	hasQM := false
	for _, c := range cs {
		hasQM = hasQM || c.Group == catalog.QueueMode
		var expires *time.Time
		if c.LeaseLive {
			expires = c.LeaseExpiresAt
		}
		groups = append(groups, map[string]any{"name": c.Group, "consumed": c.Committed > it.off, "leaseExpiresAt": instant(expires)})
	}
	md := mode(hasQM, st.totalGroups)
	md["consumedByGroups"] = st.consumedBy
	m := messageFields(&it)
	m["namespace"], m["task"], m["status"] = f.Namespace, f.Task, st.status
	m["traceId"], m["producerSub"] = optional(it.frame.TraceID), optional(it.frame.ProducerSub)
	m["leaseExpiresAt"] = instant(st.leaseExpiresAt)
	m["payload"], m["isEncrypted"] = json.RawMessage(payload), it.frame.Sealed()
	m["errorMessage"], m["retryCount"] = nil, nil
	if isDead {
		m["errorMessage"], m["retryCount"] = dl.ErrorMessage, dl.RetryCount
	}
	m["queueConfig"] = map[string]int{"leaseTime": f.LeaseTime, "retryLimit": f.RetryLimit,
		"retryDelay": f.RetryDelay, "ttl": f.TTL, "priority": f.Priority}
	m["mode"], m["consumerGroups"] = md, groups
	httpx.WriteJSON(w, http.StatusOK, m)
}

// handleDeleteMessage is DELETE /api/v1/messages/{partitionId}/{transactionId}.
// Segments are not rewritten in place anywhere else, so the deletion
// rewrites the message's segment with its frame emptied and marked deleted
// (segment.FlagDeleted): offsets hold, cursors stay, and pops, listings and
// lookups pass over the frame. A concurrent rewrite of the same segment
// makes it read and try again.
func (a *API) handleDeleteMessage(w http.ResponseWriter, r *http.Request) {
	pid, txid := r.PathValue("partitionId"), r.PathValue("transactionId")
	answer := func(ok bool) {
		msg := "Message deleted successfully"
		if !ok {
			msg = "Message not found"
		}
		httpx.WriteJSON(w, http.StatusOK, map[string]any{"success": ok, "partitionId": pid, "transactionId": txid, "message": msg})
	}
	for range 3 {
		f, frames, err := a.lookup(r)
		if err != nil {
			a.fail(w, r, err)
			return
		}
		if f == nil {
			answer(false)
			return
		}
		gone := &frames[f.Index]
		id := gone.ID
		*gone = segment.Frame{ID: id, CreatedAt: gone.CreatedAt, Flags: segment.FlagDeleted}
		body, sum := segment.Encode(nil, frames)
		done, err := a.store.DeleteMessage(r.Context(), f, txid, db.SegmentRewrite{Body: body, Checksum: int64(sum), MessageID: id})
		if err != nil {
			a.fail(w, r, err)
			return
		}
		if done {
			answer(true)
			return
		}
	}
	httpx.Fail(w, httpx.Errorf(http.StatusConflict, "The message's segment changed meanwhile; try again"))
}
