// Package testutil holds the small helpers that the tests of several
// packages share and that have nothing to do with the network (that is
// internal/testnet, though it tells namespaces apart with agent/netns): a
// log sink safe for concurrent writers (SyncBuffer); a test's logger,
// kept and printed if the test failed (Logger) or streamed through t.Log
// (StreamLogger); waiting for processes to go (WaitGone);
// waiting for a condition (Poll, PollContext, Within, Eventually, Expect,
// EventuallyCtx, WaitFor); a call that must return before a context
// ends (Returns); what /proc says of processes (ReadProcStat, ProcAlive,
// PIDs, ProcGroup, Cmdline, ToolServers, ProcsInNetNS); a process started
// in a group of its own (StartGroup); a server or loop run until the test
// ends (Run); the module's root (ModuleRoot); a
// stand-in that holds a tool in its start until the test releases it
// (ToolGate); comparing floats (Near) and microseconds (Micros); and the
// mesh state of a cut-off first node (MeshStateFirstBad); a clock that
// moves only when told (Clock); and a bearer token in a file (TokenFile).
//
// Only _test.go files import this package; its own test checks that no
// production file does. A helper that needs a test's testing.TB fails or
// skips through it and registers its own cleanup, so a caller has nothing
// to undo.
package testutil
