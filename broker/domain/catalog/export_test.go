package catalog

import (
	"context"
	"time"
)

// Len returns how many queues and partitions c caches.
func (c *Catalog) Len() (queues, partitions int) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.queues), c.nparts
}

// Refresh installs a copy of a cached queue's options loaded now, as a
// lookup past optionsTTL does.
func (c *Catalog) Refresh(tenant, name string) {
	q, err := c.LookupQueue(context.Background(), tenant, name)
	if err != nil {
		panic(err)
	}
	fresh := *q
	fresh.loaded = time.Now()
	c.rememberQueue(&fresh)
}
