// Package apitoken owns meshperf's bearer tokens: reading a token file
// (the coordinator's --api-token-file and --metrics-token-file, the CLI's
// --token-file, remote write's bearer token) by one rule, and comparing
// the bearer token a request carries with the coordinator's in constant
// time. The gRPC interceptors of MeshService (package coordinator), the
// web UI's JSON API (coordinator/web) and /metrics (coordinator/metrics)
// use the same Checker, so that what one accepts the others accept.
package apitoken

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"os"
	"strings"
)

// Reasons a request is refused, wrapped by Checker.Check: each names what
// was wrong with the request, never the token.
var (
	// ErrMissing: no authorization value.
	ErrMissing = errors.New("no API token")
	// ErrMany: more than one authorization value.
	ErrMany = errors.New("more than one authorization value")
	// ErrScheme: the value is not "Bearer TOKEN".
	ErrScheme = errors.New("authorization is not a bearer token")
	// ErrWrong: a bearer token other than the coordinator's.
	ErrWrong = errors.New("wrong API token")
)

// Read reads the API token from file (--api-token-file): ReadFile.
func Read(file string) ([]byte, error) { return ReadFile("API token (--api-token-file)", file) }

// ReadFile reads a bearer token from file: its content without the
// surrounding white space (a trailing newline, as a mounted Secret has
// it), which must not be empty nor hold white space inside (a bearer
// token is one word). what names the token and its flag in the errors,
// e.g. "metrics token (--metrics-token-file)".
func ReadFile(what, file string) ([]byte, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return Parse(what, file, b)
}

// Parse is ReadFile's rule applied to b, the content of file already
// read (by a caller that keeps it, to notice when the file changes).
func Parse(what, file string, b []byte) ([]byte, error) {
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return nil, fmt.Errorf("%s %s is empty", what, file)
	}
	if strings.ContainsAny(tok, " \t\r\n") {
		return nil, fmt.Errorf("%s %s holds white space inside the token: want one line", what, file)
	}
	return []byte(tok), nil
}

// Checker compares authorization values with one token. The zero value
// is not usable: New makes one.
type Checker struct {
	sum [sha256.Size]byte // of the token: compared at a fixed length
}

// New returns a Checker of token (not empty).
func New(token []byte) *Checker { return &Checker{sum: sha256.Sum256(token)} }

// Check returns nil when values (the request's authorization values: gRPC
// metadata or HTTP headers) are exactly one "Bearer TOKEN" with the right
// token (the scheme case-insensitive), else one of ErrMissing, ErrMany,
// ErrScheme or ErrWrong.
func (c *Checker) Check(values []string) error {
	switch {
	case len(values) == 0:
		return ErrMissing
	case len(values) > 1:
		return ErrMany
	}
	scheme, tok, ok := strings.Cut(values[0], " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ErrScheme
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(tok)))
	if subtle.ConstantTimeCompare(sum[:], c.sum[:]) != 1 {
		return ErrWrong
	}
	return nil
}
