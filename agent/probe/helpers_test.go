package probe

import (
	"log/slog"
	"os"
)

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

func benchPeers() string { return os.Getenv("PROBE_BENCH_PEERS") }
