package store

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"time"

	bolt "go.etcd.io/bbolt"
)

// A page token is where a listing stopped, handed to the client to resume
// it. It is opaque to clients and checked where it arrives:
//
//	base64url( version(1) listing(1) scope(8) key(...) crc32c(4) )
//
// listing names the listing that made it (runs, results, rollups,
// series); scope is the first 8 bytes of SHA-256 over the listing and
// its filter (every request field that selects items, page size left
// out), so a token is refused by another listing or filter; key is the
// last key the page returned, and the next page starts after it in key
// order; the CRC catches a token damaged in transit or by hand. A key
// that passes the CRC and the scope is still checked by its listing (the
// filter's prefix, the key's layout) before it is used. Key-ordered
// cursors, not offsets, keep paging stable while items are added or
// deleted between two calls.
const (
	pageTokenVersion = 1
	// pageTokenMax bounds a token's decoded size (bytes): bbolt's largest
	// key and the framing, so every key a listing returns fits.
	pageTokenMax = bolt.MaxKeySize + 64
)

// Listings, as they sit in a page token.
const (
	listingResults byte = 1 + iota
	listingRuns
	listingRollups
	listingSeries
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// pageScope fingerprints a listing and its filter for a page token.
type pageScope [8]byte

// scopeBuilder writes a canonical encoding of a listing's filter: each
// field length-prefixed, so no two filters share an encoding.
type scopeBuilder struct{ b []byte }

func newScope(listing byte) *scopeBuilder { return &scopeBuilder{b: []byte{listing}} }

func (s *scopeBuilder) str(v string) *scopeBuilder {
	s.b = binary.AppendUvarint(s.b, uint64(len(v)))
	s.b = append(s.b, v...)
	return s
}

func (s *scopeBuilder) num(v int64) *scopeBuilder {
	s.b = binary.AppendVarint(s.b, v)
	return s
}

// time writes t, an unset (zero) time apart from every set one.
func (s *scopeBuilder) time(t time.Time) *scopeBuilder {
	if t.IsZero() {
		s.b = append(s.b, 0)
		return s
	}
	s.b = append(s.b, 1)
	return s.num(t.Unix()).num(int64(t.Nanosecond()))
}

func (s *scopeBuilder) sum() pageScope {
	h := sha256.Sum256(s.b)
	return pageScope(h[:8])
}

// encodePageToken is the token that resumes the listing of scope after key.
func encodePageToken(listing byte, scope pageScope, key []byte) string {
	b := make([]byte, 0, 2+len(scope)+len(key)+4)
	b = append(b, pageTokenVersion, listing)
	b = append(b, scope[:]...)
	b = append(b, key...)
	b = binary.BigEndian.AppendUint32(b, crc32.Checksum(b, crcTable))
	return base64.RawURLEncoding.EncodeToString(b)
}

// nextPageToken is the token that resumes after last, or "" when the
// listing ended (!more).
func nextPageToken(more bool, listing byte, scope pageScope, last []byte) string {
	if !more {
		return ""
	}
	return encodePageToken(listing, scope, last)
}

// decodePageToken returns the key of a token that encodePageToken made
// for listing and scope: nil for "" (the first page); an error wrapping
// ErrInvalid, naming page_token, for any other token. The key is not
// empty, and the caller still checks it against its filter.
func decodePageToken(token string, listing byte, scope pageScope) ([]byte, error) {
	if token == "" {
		return nil, nil
	}
	bad := func(why string) ([]byte, error) {
		return nil, fmt.Errorf("%w: page_token %.40q %s", ErrInvalid, token, why)
	}
	if base64.RawURLEncoding.DecodedLen(len(token)) > pageTokenMax {
		return bad(fmt.Sprintf("is longer than %d bytes", pageTokenMax))
	}
	b, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil {
		return bad("does not decode (not a token this server returned)")
	}
	const frame = 2 + len(pageScope{}) + 4
	if len(b) <= frame {
		return bad("is too short (not a token this server returned)")
	}
	body, sum := b[:len(b)-4], binary.BigEndian.Uint32(b[len(b)-4:])
	switch {
	case crc32.Checksum(body, crcTable) != sum:
		return bad("is damaged (checksum mismatch)")
	case body[0] != pageTokenVersion:
		return bad(fmt.Sprintf("has version %d, want %d", body[0], pageTokenVersion))
	case body[1] != listing:
		return bad("belongs to another listing")
	case pageScope(body[2:10]) != scope:
		return bad("belongs to another filter: repeat the request's filter fields unchanged (only page_size may change)")
	}
	return body[10:], nil
}

// resolvePageSize resolves a request's page size: 0 means def, above max (or
// negative) is refused naming field.
func resolvePageSize(field string, n, def, maxN int) (int, error) {
	switch {
	case n == 0:
		return def, nil
	case n < 0 || n > maxN:
		return 0, fmt.Errorf("%w: %s %d is outside 1..%d", ErrInvalid, field, n, maxN)
	}
	return n, nil
}
