package boltfile

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

var errDamaged = errors.New("test file is damaged")

// whole writes a bbolt file of some pages and returns its bytes.
func whole(t *testing.T) []byte {
	t.Helper()
	path := filepath.Join(t.TempDir(), "whole.db")
	db, err := Open(path, &bolt.Options{Timeout: time.Second}, errDamaged)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists([]byte("b"))
		if err != nil {
			return err
		}
		for i := range 2000 {
			if err := b.Put([]byte{byte(i >> 8), byte(i)}, bytes.Repeat([]byte{'v'}, 100)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestOpen: a sound file opens (a new one too); a truncated file, a file
// of garbage and one whose meta pages do not check out give the caller's
// sentinel, never a crash.
func TestOpen(t *testing.T) {
	w := whole(t)
	garbage := bytes.Repeat([]byte{0xa5}, 64<<10)
	badMeta := bytes.Clone(w)
	for _, off := range []int{64, os.Getpagesize() + 64} { // inside both meta pages, pages 0 and 1
		badMeta[off] ^= 0xff
	}
	for _, tt := range []struct {
		name    string
		content []byte // nil: no file
		corrupt bool
	}{
		{"new file", nil, false},
		{"sound file", w, false},
		{"truncated", w[:len(w)/2], true},
		{"garbage", garbage, true},
		{"meta pages damaged", badMeta, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "f.db")
			if tt.content != nil {
				if err := os.WriteFile(path, tt.content, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			db, err := Open(path, &bolt.Options{Timeout: time.Second}, errDamaged)
			if tt.corrupt {
				if !errors.Is(err, errDamaged) || db != nil {
					t.Fatalf("Open = %v, %v; want an error wrapping the caller's sentinel", db, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			CloseQuietly(db)
		})
	}
}

// TestOpenLocked: a file another handle holds is bbolt's ErrTimeout, not
// a damaged file.
func TestOpenLocked(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f.db")
	db, err := Open(path, &bolt.Options{Timeout: time.Second}, errDamaged)
	if err != nil {
		t.Fatal(err)
	}
	defer CloseQuietly(db)
	if _, err := Open(path, &bolt.Options{Timeout: 50 * time.Millisecond}, errDamaged); !errors.Is(err, berrors.ErrTimeout) || errors.Is(err, errDamaged) {
		t.Errorf("second Open = %v, want ErrTimeout", err)
	}
}

// TestGuard: a panic becomes the sentinel; an error and nil pass through.
func TestGuard(t *testing.T) {
	other := errors.New("other")
	for _, tt := range []struct {
		name string
		fn   func() error
		want error
	}{
		{"nil", func() error { return nil }, nil},
		{"error", func() error { return other }, other},
		{"panic", func() error { panic("unexpected page type") }, errDamaged},
	} {
		if err := Guard(errDamaged, tt.fn); !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
			t.Errorf("%s: Guard = %v, want %v", tt.name, err, tt.want)
		}
	}
}
