package apitoken

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheck: exactly one "Bearer TOKEN" with the right token passes (the
// scheme in any case, white space around the token ignored); everything
// else is refused with the reason.
func TestCheck(t *testing.T) {
	c := New([]byte("s3cret"))
	tests := []struct {
		name   string
		values []string
		want   error
	}{
		{"right", []string{"Bearer s3cret"}, nil},
		{"scheme in lower case", []string{"bearer s3cret"}, nil},
		{"trailing space", []string{"Bearer s3cret "}, nil},
		{"none", nil, ErrMissing},
		{"two", []string{"Bearer s3cret", "Bearer s3cret"}, ErrMany},
		{"basic", []string{"Basic s3cret"}, ErrScheme},
		{"no scheme", []string{"s3cret"}, ErrScheme},
		{"wrong", []string{"Bearer s3cre"}, ErrWrong},
		{"longer", []string{"Bearer s3crett"}, ErrWrong},
		{"empty token", []string{"Bearer "}, ErrWrong},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := c.Check(tt.values); !errors.Is(err, tt.want) {
				t.Errorf("Check(%q) = %v, want %v", tt.values, err, tt.want)
			}
		})
	}
}

// TestRead: the token file's one line without white space around it; an
// empty file, a token with white space inside and a missing file are
// errors naming the flag.
func TestRead(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		f := filepath.Join(dir, name)
		if err := os.WriteFile(f, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return f
	}
	tok, err := Read(write("good", "  abc\n"))
	if err != nil || string(tok) != "abc" {
		t.Errorf("Read: %q, %v; want abc", tok, err)
	}
	for _, f := range []string{write("empty", "\n"), write("two", "a b\n"), filepath.Join(dir, "missing")} {
		if _, err := Read(f); err == nil || !strings.Contains(err.Error(), "--api-token-file") {
			t.Errorf("Read(%s): %v, want an error naming --api-token-file", f, err)
		}
	}
}
