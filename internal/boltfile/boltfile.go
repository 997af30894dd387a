// Package boltfile owns opening a bbolt file (go.etcd.io/bbolt) that may
// be damaged without crashing the process that reads it: the
// coordinator's store and the agent's result spool open theirs here. A
// truncated file, one whose pages do not check out, or one bbolt panics
// on becomes an error wrapping the caller's own sentinel, so each caller
// decides what a damaged file means (the spool moves it aside, the store
// refuses to start).
package boltfile

import (
	"errors"
	"fmt"
	"os"
	"runtime/debug"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// Open opens the bbolt file at path (created with mode 0600 if missing)
// with opts and checks that it holds every page its meta page counts (a
// truncated file does not: reading past its end would fault). A damaged
// file, bbolt's ErrInvalid, ErrChecksum and ErrVersionMismatch, and its
// panics and memory faults while opening, give an error wrapping corrupt;
// a lock held past opts.Timeout gives bbolt's errors.ErrTimeout
// (wrapped); other errors are bbolt's or the file system's.
func Open(path string, opts *bolt.Options, corrupt error) (db *bolt.DB, err error) {
	err = Guard(corrupt, func() error {
		db, err = bolt.Open(path, 0o600, opts)
		switch {
		case errors.Is(err, berrors.ErrInvalid), errors.Is(err, berrors.ErrChecksum), errors.Is(err, berrors.ErrVersionMismatch):
			return fmt.Errorf("%w: %w", corrupt, err)
		case err != nil:
			return err
		}
		fi, err := os.Stat(path)
		if err != nil {
			return err
		}
		return db.View(func(tx *bolt.Tx) error {
			if need := tx.Size(); fi.Size() < need {
				return fmt.Errorf("%w: the file has %d bytes, its pages need %d (truncated?)", corrupt, fi.Size(), need)
			}
			return nil
		})
	})
	if err != nil {
		if db != nil {
			CloseQuietly(db)
		}
		return nil, err
	}
	return db, nil
}

// CloseQuietly closes db after a failure that already has its error: the
// close's own error, and a panic of closing a damaged file, are dropped.
func CloseQuietly(db *bolt.DB) {
	defer func() { _ = recover() }()
	_ = db.Close()
}

// Guard calls fn, a use of a bbolt file that may read damaged pages (the
// first transaction over a file just opened), and turns a panic of bbolt
// or a memory fault of reading the file's mapping into an error wrapping
// corrupt.
func Guard(corrupt error, fn func() error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: %v", corrupt, p)
		}
	}()
	return fn()
}
