package containers_test

import (
	"bufio"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/regent-mq/regent/test/brokertest"
	"github.com/regent-mq/regent/test/chart"
)

// exported returns the names of the samples an endpoint serves.
func exported(url string) map[string]bool {
	names := map[string]bool{}
	resp, err := http.Get(url)
	if err != nil {
		return names
	}
	defer resp.Body.Close()
	s := bufio.NewScanner(resp.Body)
	s.Buffer(make([]byte, 1<<16), 1<<20)
	for s.Scan() {
		line := s.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		if i := strings.IndexAny(line, "{ "); i > 0 {
			names[line[:i]] = true
		}
	}
	return names
}

// Every metric the dashboards and alert rules select is one that a broker
// or an operator, run as the chart runs them, exports: a misspelt or
// renamed metric would leave a panel empty or an alert that never fires.
// The broker is driven until each of its series exists: a push, a pop, a
// dead letter, a committed cycle, a refused one and a consumer group
// behind.
func TestEveryMetricTheDashboardsAndRulesSelectIsExported(t *testing.T) {
	want := map[string][]string{}
	for _, e := range chart.Expressions(t) {
		names, err := e.Metrics()
		if err != nil {
			t.Fatalf("%s: %v", e.Where, err)
		}
		for _, n := range names {
			want[n] = append(want[n], e.Where)
		}
	}
	// up is the one series Prometheus makes itself, for every target it scrapes.
	delete(want, "up")

	st := startStack(t, "tenancy-auth", "acme", "REGENT_LAG_INTERVAL=200ms")
	api, tok := brokertest.At(st.broker.url), st.broker.token(t)
	do := func(method, path string, body any, status int) brokertest.Response {
		t.Helper()
		r := api.Do(t, method, path, tok, body)
		if r.Status != status {
			t.Fatalf("%s %s: %d %s", method, path, r.Status, r.Body)
		}
		return r
	}
	var items []any
	for i := range 3 {
		items = append(items, map[string]any{"queue": "page-views", "payload": map[string]any{"n": i}})
	}
	do("POST", "/api/v1/push", map[string]any{"items": items}, http.StatusCreated)
	var p struct {
		LeaseID  string `json:"leaseId"`
		Messages []struct {
			TransactionID string `json:"transactionId"`
			PartitionID   string `json:"partitionId"`
		} `json:"messages"`
	}
	do("GET", "/api/v1/pop/queue/page-views?batch=1&consumerGroup=dead", nil, http.StatusOK).JSON(t, &p)
	do("POST", "/api/v1/ack", map[string]any{"transactionId": p.Messages[0].TransactionID,
		"partitionId": p.Messages[0].PartitionID, "status": "dlq", "consumerGroup": "dead"}, http.StatusOK)
	do("GET", "/api/v1/pop/queue/page-views?batch=2", nil, http.StatusOK).JSON(t, &p)
	var c struct {
		Success bool   `json:"success"`
		Error   string `json:"error"`
	}
	do("POST", "/streams/v1/cycle", map[string]any{"query_id": st.queryID, "partition_id": p.Messages[0].PartitionID,
		"ack": map[string]any{"leaseId": p.LeaseID, "status": "completed", "count": 2}}, http.StatusOK).JSON(t, &c)
	if !c.Success {
		t.Fatalf("cycle refused: %s", c.Error)
	}
	// The same cycle again: its lease is gone, so it is refused, which
	// starts the query's refused-in-a-row series.
	do("POST", "/streams/v1/cycle", map[string]any{"query_id": st.queryID, "partition_id": p.Messages[0].PartitionID,
		"ack": map[string]any{"leaseId": p.LeaseID, "status": "completed", "count": 2}}, http.StatusOK).JSON(t, &c)
	if c.Success {
		t.Fatal("a cycle repeated after it committed was not refused")
	}

	brokertest.Eventually(t, 60*time.Second, func() error {
		got := exported(st.broker.metrics + "/metrics")
		for n := range exported(st.metrics) {
			got[n] = true
		}
		var missing []string
		for n := range want {
			if !got[n] {
				missing = append(missing, fmt.Sprintf("%s (selected by %v)", n, want[n]))
			}
		}
		if len(missing) > 0 {
			slices.Sort(missing)
			return fmt.Errorf("exported by neither the broker nor the operator: %v", missing)
		}
		return nil
	})
}
