package queue_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/regent-mq/regent/test/brokertest"
	"github.com/regent-mq/regent/test/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// push sends items and requires 201.
func push(t *testing.T, b *brokertest.Broker, items ...map[string]any) []map[string]any {
	t.Helper()
	resp := b.Do(t, "POST", "/api/v1/push", "", map[string]any{"items": items})
	if resp.Status != http.StatusCreated {
		t.Fatalf("push: %d %s", resp.Status, resp.Body)
	}
	var out []map[string]any
	resp.JSON(t, &out)
	return out
}

// msgs makes n items for queue/partition with payload {"n": i}.
func msgs(queue, partition string, from, n int) []map[string]any {
	out := make([]map[string]any, n)
	for i := range out {
		out[i] = map[string]any{"queue": queue, "partition": partition, "payload": map[string]any{"n": from + i}}
	}
	return out
}

var _ = fmt.Sprint
