package procstat

import (
	"errors"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestParse: the fields after a comm with spaces and parentheses, and
// each way a line can be wrong.
func TestParse(t *testing.T) {
	// Fields 6 to 13, then 14 and 15 (utime 250, stime 50), 16 to 21, then
	// field 22, the start time, and two more.
	rest := strings.Repeat(" 0", 8) + " 250 50" + strings.Repeat(" 0", 6) + " 12345 0 0"
	for _, tt := range []struct {
		name    string
		text    string
		want    Stat
		wantErr string
	}{
		{"plain", "42 (sleep) S 1 42" + rest, Stat{PID: 42, State: 'S', PPID: 1, PGRP: 42, UTime: 250, STime: 50, StartTime: 12345}, ""},
		{"comm with ) and spaces", "7 (a) b (c) Z 3 5" + rest, Stat{PID: 7, State: 'Z', PPID: 3, PGRP: 5, UTime: 250, STime: 50, StartTime: 12345}, ""},
		{"truncated", "42 (sleep) S 1 42", Stat{}, "5 fields"},
		{"no comm", "42 sleep S 1 42" + rest, Stat{}, "no ')'"},
		{"bad ppid", "42 (sleep) S x 42" + rest, Stat{}, `ppid "x"`},
		{"state not a letter", "42 (sleep) 7 1 42" + rest, Stat{}, `state "7"`},
		{"negative utime", "42 (sleep) S 1 42" + strings.Replace(rest, " 250 ", " -250 ", 1), Stat{}, `utime "-250"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			pid, _ := strconv.Atoi(strings.Fields(tt.text)[0])
			got, err := Parse(pid, []byte(tt.text))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Parse = %+v, %v; want an error containing %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("Parse = %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
	if got := (Stat{UTime: 250, STime: 50}).CPUSeconds(); got != 3 {
		t.Errorf("CPUSeconds of 300 ticks = %v, want 3", got)
	}
}

// TestRead: this process as /proc says it, and no process at all.
func TestRead(t *testing.T) {
	s, err := Read(os.Getpid())
	if err != nil || s.PID != os.Getpid() || s.PPID != os.Getppid() || !s.Alive() || s.StartTime == 0 {
		t.Errorf("Read(self) = %+v, %v; want this running process, parent %d", s, err, os.Getppid())
	}
	// PIDs never exceed 2^22 (pid_max's limit).
	if _, err := Read(1 << 23); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Read of no process: %v, want fs.ErrNotExist", err)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte("42 (sleep) S 1 42 0 0 0 0 0 0 0 0 250 50 0 0 20 0 1 0 12345"))
	f.Add([]byte("1 ())) R 0 1"))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := Parse(1, b)
		if err == nil && (s.PID != 1 || !isLetter(s.State)) {
			t.Errorf("Parse(%q) = %+v, nil", b, s)
		}
		if err != nil && s != (Stat{}) {
			t.Errorf("Parse(%q) = %+v with error %v, want a zero Stat", b, s, err)
		}
	})
}
