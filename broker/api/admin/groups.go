package admin

import (
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"time"

	"github.com/regent-mq/regent/broker/api/httpx"
	"github.com/regent-mq/regent/broker/domain/commit"
	"github.com/regent-mq/regent/broker/pg/db"
)

// lagging is the age of the oldest unconsumed message past which a group's
// state is Lagging.
const lagging = 300

// handleGroups is GET /api/v1/consumer-groups: a bare array, one element per
// (group, queue) pair holding a cursor.
func (a *API) handleGroups(w http.ResponseWriter, r *http.Request) {
	groups, err := a.store.ConsumerGroups(r.Context(), tenant(r))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	now := time.Now()
	out := make([]map[string]any, 0, len(groups))
	for _, g := range groups {
		lag := ageSeconds(g.Oldest, now)
		state := "Dead"
		switch {
		case lag > lagging:
			state = "Lagging"
		case g.Moved:
			state = "Stable"
		}
		out = append(out, map[string]any{
			"name": g.Name, "queueName": g.Queue, "topics": []string{g.Queue}, "members": g.Members,
			"partitionsWithLag": g.WithLag, "maxTimeLag": lag, "totalLag": nil, "state": state,
			"subscriptionMode": g.SubMode, "subscriptionTimestamp": instant(g.SubStart),
			"subscriptionCreatedAt": instant(g.SubCreated),
			// Aliases the CLI's tables read (§1).
			"lagSeconds": lag, "lagMessages": g.LagMessages,
		})
	}
	httpx.WriteJSON(w, http.StatusOK, out)
}

// handleLagging is GET /api/v1/consumer-groups/lagging: a bare array of the
// cursors lagging more than minLagSeconds, in snake_case as Queen writes it.
func (a *API) handleLagging(w http.ResponseWriter, r *http.Request) {
	minLag, err := minLagSeconds(r)
	if err != nil {
		httpx.Fail(w, err)
		return
	}
	cursors, err := a.store.LaggingCursors(r.Context(), tenant(r), time.Duration(minLag)*time.Second)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	now := time.Now()
	out := make([]map[string]any, 0, len(cursors))
	for _, c := range cursors {
		lag := ageSeconds(c.Oldest, now)
		out = append(out, map[string]any{
			"consumer_group": c.Group, "queue_name": c.Queue, "partition_name": c.Partition,
			"partition_id": c.PartitionID, "worker_id": c.LeaseID, "offset_lag": c.OffsetLag,
			"time_lag_seconds": lag, "lag_hours": math.Round(float64(lag)/36) / 100,
			"oldest_unconsumed_at": instant(c.Oldest), "last_consumed_at": instant(c.LastConsumedAt),
		})
	}
	httpx.WriteJSON(w, http.StatusOK, out)
}

// handleGroup is GET /api/v1/consumer-groups/{group}: the group's cursors by
// queue; an unknown group is {}.
func (a *API) handleGroup(w http.ResponseWriter, r *http.Request) {
	path, err := pathTexts(r, "group")
	if err != nil {
		httpx.Fail(w, err)
		return
	}
	cursors, err := a.store.GroupCursors(r.Context(), tenant(r), path[0])
	if err != nil {
		a.fail(w, r, err)
		return
	}
	now := time.Now()
	out := map[string]map[string][]map[string]any{}
	for _, c := range cursors {
		q := out[c.Queue]
		if q == nil {
			q = map[string][]map[string]any{"partitions": {}}
			out[c.Queue] = q
		}
		q["partitions"] = append(q["partitions"], map[string]any{
			"partition": c.Partition, "workerId": c.LeaseID, "lastConsumedAt": instant(c.LastConsumedAt),
			"totalConsumed": c.TotalConsumed, "offsetLag": c.OffsetLag, "timeLagSeconds": ageSeconds(c.Oldest, now),
			"leaseActive": c.LeaseActive,
		})
	}
	httpx.WriteJSON(w, http.StatusOK, out)
}

// handleDeleteGroup is DELETE /api/v1/consumer-groups/{group}. An unknown
// group is deleted with 0, never a 404.
func (a *API) handleDeleteGroup(w http.ResponseWriter, r *http.Request) { a.delete(w, r, "group") }

// handleDeleteGroupQueue is DELETE /api/v1/consumer-groups/{group}/queues/{queue}.
func (a *API) handleDeleteGroupQueue(w http.ResponseWriter, r *http.Request) {
	a.delete(w, r, "group", "queue")
}

// delete deletes the group the path names, from the queue it names if any.
func (a *API) delete(w http.ResponseWriter, r *http.Request, names ...string) {
	path, err := pathTexts(r, names...)
	if err != nil {
		httpx.Fail(w, err)
		return
	}
	group, queue := path[0], (*string)(nil)
	if len(path) > 1 {
		queue = &path[1]
	}
	metadata := boolQuery(r, "deleteMetadata", true)
	deleted, err := a.store.DeleteGroup(r.Context(), tenant(r), group, queue, metadata)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	a.wake(deleted)
	out := map[string]any{"success": true, "consumerGroup": group, "deletedPartitions": len(deleted), "metadataDeleted": metadata}
	if queue != nil {
		out["queueName"] = *queue
	}
	httpx.WriteJSON(w, http.StatusOK, out)
}

// handleSeek is POST /api/v1/consumer-groups/{group}/queues/{queue}/seek,
// {"toEnd": true} or {"timestamp": ...}. It moves only the cursors the group
// has, and announces them: a rewound partition is popped at once.
func (a *API) handleSeek(w http.ResponseWriter, r *http.Request) {
	path, err := pathTexts(r, "group", "queue")
	if err != nil {
		httpx.Fail(w, err)
		return
	}
	var fields map[string]json.RawMessage
	if err := readBody(r, &fields); err != nil {
		httpx.Fail(w, err)
		return
	}
	toEnd := false
	if present(fields, "toEnd") {
		if err := json.Unmarshal(fields["toEnd"], &toEnd); err != nil {
			httpx.Fail(w, httpx.BadRequest("toEnd must be a boolean"))
			return
		}
	}
	var target *time.Time
	if !toEnd && present(fields, "timestamp") {
		t, err := timeField(fields, "timestamp")
		if err != nil {
			httpx.Fail(w, err)
			return
		}
		target = &t
	}
	if !toEnd && target == nil {
		httpx.Fail(w, httpx.BadRequest("Must specify either 'toEnd': true or 'timestamp'"))
		return
	}
	group, queue := path[0], path[1]
	var moved []db.MovedCursor
	if toEnd {
		moved, err = a.store.SeekToEnd(r.Context(), tenant(r), group, queue)
	} else {
		moved, err = a.store.SeekTo(r.Context(), tenant(r), group, queue, *target)
	}
	if err != nil {
		a.fail(w, r, err)
		return
	}
	a.wake(moved)
	httpx.WriteJSON(w, http.StatusOK, map[string]any{
		"success": true, "consumerGroup": group, "queueName": queue, "seekToEnd": toEnd,
		"targetTimestamp": instant(target), "partitionsUpdated": len(moved),
	})
}

// handlePartitionSeek is POST .../queues/{queue}/partitions/{partition}/seek:
// one partition to its end. It reads no body.
func (a *API) handlePartitionSeek(w http.ResponseWriter, r *http.Request) {
	path, err := pathTexts(r, "group", "queue", "partition")
	if err != nil {
		httpx.Fail(w, err)
		return
	}
	group, queue, partition := path[0], path[1], path[2]
	moved, at, err := a.store.SeekPartitionToEnd(r.Context(), tenant(r), group, queue, partition)
	if errors.Is(err, db.ErrNoSuchPartition) {
		httpx.WriteJSON(w, http.StatusNotFound, map[string]any{"success": false, "error": "Partition not found"})
		return
	}
	if err != nil {
		a.fail(w, r, err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{
		"success": true, "consumerGroup": group, "queueName": queue, "partitionName": partition,
		"updated": moved != nil, "cursorMovedTo": instant(at),
	})
}

// handleSubscription is POST /api/v1/consumer-groups/{group}/subscription:
// every subscription of the group starts after subscriptionTimestamp.
func (a *API) handleSubscription(w http.ResponseWriter, r *http.Request) {
	path, err := pathTexts(r, "group")
	if err != nil {
		httpx.Fail(w, err)
		return
	}
	var fields map[string]json.RawMessage
	if err := readBody(r, &fields); err != nil {
		httpx.Fail(w, err)
		return
	}
	if !present(fields, "subscriptionTimestamp") {
		httpx.Fail(w, httpx.BadRequest("Missing subscriptionTimestamp in request body"))
		return
	}
	t, err := timeField(fields, "subscriptionTimestamp")
	if err != nil {
		httpx.Fail(w, err)
		return
	}
	group := path[0]
	n, err := a.store.SetSubscriptionStart(r.Context(), tenant(r), group, t)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	var sent string
	_ = json.Unmarshal(fields["subscriptionTimestamp"], &sent) // a string: timeField parsed it
	httpx.WriteJSON(w, http.StatusOK, map[string]any{
		"success": true, "consumerGroup": group, "newTimestamp": sent, "rowsUpdated": n,
	})
}

// wake announces the partitions whose cursors a seek or a deletion moved:
// the hot list may hold them as idle for the group, and Queen's pops rescan
// after a seek (§1).
func (a *API) wake(moved []db.MovedCursor) {
	var after commit.After
	for _, m := range moved {
		after.Announce = append(after.Announce, commit.Partition{Queue: m.Queue, Partition: m.Partition})
	}
	a.after.Apply(after)
}

// handleStatsRefresh is POST /api/v1/stats/refresh. Regent computes every
// figure on demand and caches none, so there is nothing to redo.
func handleStatsRefresh(w http.ResponseWriter, r *http.Request) {
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"success": true})
}
