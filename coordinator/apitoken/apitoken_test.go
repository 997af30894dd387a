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

// TestReadFile: every token file is read by one rule, its errors naming
// the caller's token and flag: Parse on the bytes agrees with ReadFile on
// the file.
func TestReadFile(t *testing.T) {
	const what = "metrics token (--metrics-token-file)"
	for _, tt := range []struct {
		name, content, want, wantErr string
	}{
		{"secret's newline", "s3cret\n", "s3cret", ""},
		{"white space around", " \ts3cret \r\n", "s3cret", ""},
		{"empty", " \n", "", what + " FILE is empty"},
		{"space inside", "two words\n", "", what + " FILE holds white space inside the token"},
		{"two lines", "one\ntwo\n", "", what + " FILE holds white space inside the token"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := filepath.Join(t.TempDir(), "token")
			if err := os.WriteFile(f, []byte(tt.content), 0o600); err != nil {
				t.Fatal(err)
			}
			wantErr := strings.ReplaceAll(tt.wantErr, "FILE", f)
			got, err := ReadFile(what, f)
			parsed, perr := Parse(what, f, []byte(tt.content))
			for _, r := range []struct {
				fn  string
				got []byte
				err error
			}{{"ReadFile", got, err}, {"Parse", parsed, perr}} {
				if tt.wantErr != "" {
					if r.err == nil || !strings.HasPrefix(r.err.Error(), wantErr) {
						t.Errorf("%s: %q, %v; want an error starting %q", r.fn, r.got, r.err, wantErr)
					}
					continue
				}
				if r.err != nil || string(r.got) != tt.want {
					t.Errorf("%s: %q, %v; want %q", r.fn, r.got, r.err, tt.want)
				}
			}
		})
	}
	if _, err := ReadFile(what, filepath.Join(t.TempDir(), "missing")); err == nil || !strings.HasPrefix(err.Error(), what+": ") {
		t.Errorf("missing file: %v, want an error starting %q", err, what+": ")
	}
}
