package cluster_test

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/regent-mq/regent/test/brokertest"
	"github.com/regent-mq/regent/test/cluster"
	"github.com/regent-mq/regent/test/pgtest"
	"github.com/regent-mq/regent/test/pushload"
)

// fault is one toxic between the brokers and PostgreSQL, held for a while.
type fault struct{ name, toxic string }

var faults = []fault{
	{"latency", `{"type":"latency","attributes":{"latency":150,"jitter":50}}`},
	{"bandwidth", `{"type":"bandwidth","attributes":{"rate":32}}`},
	{"stall", `{"type":"timeout","attributes":{"timeout":0}}`},
	{"reset", `{"type":"reset_peer","attributes":{"timeout":0}}`},
}

// TestNetworkFaultsBetweenBrokerAndPostgreSQLLoseNothing puts toxiproxy
// between two brokers and PostgreSQL and injects, in turn, latency, a
// bandwidth limit, a stall and connection resets, both ways, under a push
// load. No acknowledged push may be lost or stored twice, no request may
// outlive its client's deadline, and after each fault the brokers recover
// without a restart.
func TestNetworkFaultsBetweenBrokerAndPostgreSQLLoseNothing(t *testing.T) {
	t.Parallel()
	hold, rounds := time.Second, 1
	if chaos {
		hold, rounds = 3*time.Second, 5
	}
	db, err := url.Parse(pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	zerolog.SetGlobalLevel(zerolog.Disabled) // the toxics log through the global logger
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
	proxy := toxiproxy.NewProxy(srv, "postgres", "127.0.0.1:0", db.Host)
	if err := proxy.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Stop)
	db.Host = proxy.Listen
	bs := cluster.Start(t, db.String(), 2)
	load := pushload.Start(urls(bs), "net", "")
	if !load.WaitFlowing(10, 30*time.Second) {
		load.Halt()
		t.Fatal("no pushes before any fault")
	}
	injected := 0
	for r := range rounds {
		for _, f := range faults {
			load.Mark(true)
			for _, stream := range []string{"upstream", "downstream"} {
				name := fmt.Sprintf("%s-%s-%d", f.name, stream, r)
				toxic := strings.Replace(f.toxic, "{", fmt.Sprintf(`{"name":%q,"stream":%q,`, name, stream), 1)
				if _, err := proxy.Toxics.AddToxicJson(strings.NewReader(toxic)); err != nil {
					load.Halt()
					t.Fatalf("add toxic %s: %v", name, err)
				}
				injected++
			}
			// Real time: the fault lasts as long as a network's would,
			// while the load meets it.
			time.Sleep(hold)
			proxy.Toxics.ResetToxics(context.Background())
			load.Mark(false)
			if !load.WaitFlowing(10, 30*time.Second) {
				load.Halt()
				t.Fatalf("after the %s fault the brokers did not recover within 30s: 201s since per broker %v; answers %v",
					f.name, load.Since, load.Statuses)
			}
		}
	}
	load.Halt()
	acked, lost, dup := load.Verify(t, brokertest.At(bs[0].URL))
	requests := 0
	for _, n := range load.Statuses {
		requests += n
	}
	t.Logf("figures: %d faults injected, %d requests (%v), %d acknowledged, %d lost, %d duplicated, p99 during faults %v",
		injected, requests, load.Statuses, acked, lost, dup, load.P99().Round(time.Millisecond))
	if load.Statuses["hung"] > 0 {
		t.Errorf("%d requests outlived their client's %v deadline", load.Statuses["hung"], pushload.Client.Timeout)
	}
}
