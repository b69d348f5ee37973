package catalog_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/regent-mq/regent/broker/config"
	"github.com/regent-mq/regent/broker/domain/catalog"
	"github.com/regent-mq/regent/broker/pg/db"
	"github.com/regent-mq/regent/test/pgtest"
)

// BenchmarkRefreshOfOneQueueBeside100kPartitionsOfOthers: a queue's
// options are read again every optionsTTL, and the refresh rebinds that
// queue's cached partitions, under the write lock that every push and pop
// waits on. It must cost what that queue holds, not what the others do.
//
//	go test ./broker/domain/catalog -run '^$' -bench RefreshOfOneQueue
func BenchmarkRefreshOfOneQueueBeside100kPartitionsOfOthers(b *testing.B) {
	d := db.New(pgtest.New(b))
	cat := catalog.New(d, config.DefaultCatalogSize)
	ctx := context.Background()
	for q := range 100 {
		ts := make([]catalog.Target, 1000)
		for i := range ts {
			ts[i] = catalog.Target{Tenant: "default", Queue: fmt.Sprintf("q%d", q), Partition: fmt.Sprintf("p%d", i)}
		}
		if _, err := cat.ResolveAll(ctx, ts); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := cat.Resolve(ctx, catalog.Target{Tenant: "default", Queue: "small", Partition: "p"}); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		cat.Refresh("default", "small")
	}
}
