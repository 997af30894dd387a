package store

import (
	"encoding/binary"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"

	bolt "go.etcd.io/bbolt"

	"github.com/meshperf/meshperf/coordinator/series"
)

// This file holds how the series store names nodes: each node name gets a
// 4-byte ID (bucketSeriesNodes, bucketSeriesNodeIDs), cached in memory.

// nodeCache holds the interned node names known to be committed; it is
// copied on write (new names are rare), so lookups take no lock.
type nodeCache struct {
	mu     sync.Mutex // serialises add
	byName atomic.Pointer[map[string]uint32]
}

func (c *nodeCache) get(name string) (uint32, bool) {
	m := c.byName.Load()
	if m == nil {
		return 0, false
	}
	id, ok := (*m)[name]
	return id, ok
}

func (c *nodeCache) add(fresh map[string]uint32) {
	if len(fresh) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	m := map[string]uint32{}
	if old := c.byName.Load(); old != nil {
		m = maps.Clone(*old)
	}
	maps.Copy(m, fresh)
	c.byName.Store(&m)
}

// interner maps node names to IDs in a transaction; fresh collects the
// names it read or created, to be cached once the transaction commits.
type interner struct {
	tx    *bolt.Tx
	cache *nodeCache
	fresh map[string]uint32
}

// cached is name's ID from the cache or the names this transaction read
// or created, without reading the file; false if neither has it. Safe
// for concurrent use while nothing adds to fresh.
func (in *interner) cached(name string) (uint32, bool) {
	if id, ok := in.cache.get(name); ok {
		return id, true
	}
	id, ok := in.fresh[name]
	return id, ok
}

// lookupPair is lookup of k's source and destination: ok is false if
// either name was never interned (the series has nothing stored).
func (in *interner) lookupPair(k series.Key) (src, dst uint32, ok bool, err error) {
	if src, ok, err = in.lookup(k.Src); err != nil || !ok {
		return 0, 0, ok, err
	}
	dst, ok, err = in.lookup(k.Dst)
	return src, dst, ok, err
}

// lookup is name's ID; false if it has none.
func (in *interner) lookup(name string) (uint32, bool, error) {
	if id, ok := in.cache.get(name); ok {
		return id, true, nil
	}
	if id, ok := in.fresh[name]; ok {
		return id, true, nil
	}
	if in.tx == nil {
		return 0, false, nil
	}
	v := in.tx.Bucket(bucketSeriesNodes).Get([]byte(name))
	if v == nil {
		return 0, false, nil
	}
	if len(v) != 4 {
		return 0, false, fmt.Errorf("%w: node id of %q has %d bytes", ErrCorrupt, name, len(v))
	}
	id := binary.BigEndian.Uint32(v)
	if in.fresh != nil {
		in.fresh[name] = id
	}
	return id, true, nil
}

// id is name's ID, created if it has none (write transactions only).
func (in *interner) id(name string) (uint32, error) {
	id, ok, err := in.lookup(name)
	if err != nil || ok {
		return id, err
	}
	ids := in.tx.Bucket(bucketSeriesNodeIDs)
	seq, err := ids.NextSequence()
	if err != nil {
		return 0, err
	}
	if seq > 1<<32-1 {
		return 0, fmt.Errorf("series node IDs exhausted")
	}
	id = uint32(seq)
	k := binary.BigEndian.AppendUint32(nil, id)
	if err := ids.Put(k, []byte(name)); err != nil {
		return 0, err
	}
	if err := in.tx.Bucket(bucketSeriesNodes).Put([]byte(name), k); err != nil {
		return 0, err
	}
	in.fresh[name] = id
	return id, nil
}
