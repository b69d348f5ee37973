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

// Expire makes a cached queue's options older than optionsTTL, as time
// would: the next lookup of the queue or of its partitions reads them
// again.
func (c *Catalog) Expire(tenant, name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.queues[queueKey{tenant, name}]
	old := *e.v
	old.loaded = old.loaded.Add(-optionsTTL - time.Millisecond)
	e.v = &old
	for _, s := range e.parts {
		s.v = &Partition{ID: s.v.ID, Name: s.v.Name, Queue: &old}
	}
}

// Owners returns how many query owners c caches.
func (c *Catalog) Owners() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.owners)
}
