package db

// shard is the distribution argument of a hot call that names partitions,
// ids (queen.log_push_v2, queen.pop_v2, queen.ack_v2): the first of them,
// whose worker Citus sends the whole call to. With none, the call does
// nothing and any worker will do: the nil UUID, never NULL, since Citus
// 13.2 crashes on a prepared call of a distributed function whose
// distribution argument is NULL (CITUS.md).
func shard[T ~[16]byte](ids []T) [16]byte {
	if len(ids) == 0 {
		return [16]byte{}
	}
	return ids[0]
}
