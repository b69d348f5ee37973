package catalog

// Len returns how many queues and partitions c caches.
func (c *Catalog) Len() (queues, partitions int) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.queues), len(c.parts)
}
