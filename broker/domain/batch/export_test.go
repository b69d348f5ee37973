package batch

// Waiting is how many requests wait for a call, for the tests to know when
// the ones they sent have queued.
func (j *Joiner[T]) Waiting() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return len(j.waiting)
}
