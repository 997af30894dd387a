package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// This file keeps the record of client work in flight: which node each
// test's client work was dispatched to, so that a late answer (one that
// comes after its run ended, maybe to another coordinator process) is
// taken only from that node and only for a test it had in flight. The
// record is written before the work is sent and deleted once the answer
// is stored, or when its run ends with every test answered.

// PutDispatched records, durably, that the client work workID
// (RUN_ID/TEST_ID) goes to node at at. It is written before the work is
// sent: a record without work is harmless, work without a record would
// lose its late answer.
func (s *Store) PutDispatched(ctx context.Context, workID, node string, at time.Time) error {
	if err := validID("work_id", workID); err != nil {
		return err
	}
	if err := validID("node", node); err != nil {
		return err
	}
	v := make([]byte, 8, 8+len(node))
	binary.BigEndian.PutUint64(v, uint64(at.UnixNano()))
	v = append(v, node...)
	return s.batch(ctx, func(tx *bolt.Tx) error {
		return tx.Bucket(bucketDispatched).Put([]byte(workID), v)
	})
}

// Dispatched returns the node workID's client work was dispatched to and
// when; ok is false if no record is kept (never dispatched, answered, or
// pruned).
func (s *Store) Dispatched(ctx context.Context, workID string) (node string, at time.Time, ok bool, err error) {
	if err := ctx.Err(); err != nil {
		return "", time.Time{}, false, err
	}
	err = s.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketDispatched).Get([]byte(workID))
		if len(v) < 8 {
			return nil
		}
		node, at, ok = string(v[8:]), time.Unix(0, int64(binary.BigEndian.Uint64(v[:8]))), true
		return nil
	})
	if err != nil {
		return "", time.Time{}, false, fmt.Errorf("read dispatch of %s: %w", workID, err)
	}
	return node, at, ok, nil
}

// DeleteDispatched forgets the records of workIDs.
func (s *Store) DeleteDispatched(ctx context.Context, workIDs ...string) error {
	if len(workIDs) == 0 {
		return nil
	}
	return s.batch(ctx, func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketDispatched)
		for _, id := range workIDs {
			if err := b.Delete([]byte(id)); err != nil {
				return err
			}
		}
		return nil
	})
}

// DeleteRunDispatched forgets every record of runID's tests (its work IDs
// are RUN_ID/TEST_ID) and returns how many there were.
func (s *Store) DeleteRunDispatched(ctx context.Context, runID string) (int, error) {
	if err := validID("run_id", runID); err != nil {
		return 0, err
	}
	prefix := []byte(runID + "/")
	return s.deleteDispatchedWhere(ctx, func(k, _ []byte) bool { return bytes.HasPrefix(k, prefix) }, prefix)
}

// PruneDispatched forgets the records of work dispatched before cutoff
// (answers that never came) and returns how many there were.
func (s *Store) PruneDispatched(ctx context.Context, cutoff time.Time) (int, error) {
	c := cutoff.UnixNano()
	return s.deleteDispatchedWhere(ctx, func(_, v []byte) bool {
		return len(v) < 8 || int64(binary.BigEndian.Uint64(v[:8])) < c
	}, nil)
}

// deleteDispatchedWhere deletes the records for which del is true, from
// the first key with prefix on while keys have it (prefix nil: all).
func (s *Store) deleteDispatchedWhere(ctx context.Context, del func(k, v []byte) bool, prefix []byte) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	n := 0
	err := s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketDispatched)
		c := b.Cursor()
		k, v := c.First()
		if prefix != nil {
			k, v = c.Seek(prefix)
		}
		var gone [][]byte // deleting under a cursor may skip the next key
		for ; k != nil && (prefix == nil || bytes.HasPrefix(k, prefix)); k, v = c.Next() {
			if del(k, v) {
				gone = append(gone, bytes.Clone(k))
			}
		}
		for _, k := range gone {
			if err := b.Delete(k); err != nil {
				return err
			}
		}
		n = len(gone)
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("store write: %w", err)
	}
	return n, nil
}
