// Package spool keeps the agent's client results that the coordinator has
// not acknowledged yet, so that neither a broken stream nor a coordinator
// killed mid-run loses one.
//
// The agent puts every answer to run_client work into the spool before it
// sends it, removes it when a ResultAck names its work ID, and after each
// registration sends again, oldest first, everything the spool still holds.
// The spool is a bbolt file, FileName in the agent's state directory, so
// that it also outlives the agent; with no directory it lives in memory
// only and dies with the agent. It is bounded by a number of results: when
// it is full, the oldest result is dropped, logged and counted, and the
// count is kept in the file.
//
// It also keeps the continuous mesh's ProbeReports (reports.go), numbered
// by a sequence that survives restarts, until a ReportAck names them; they
// are bounded apart (Config.MaxReports).
//
// A spool file that bbolt cannot read (truncated, overwritten) is moved
// aside (FileName.corrupt-TIME) and a new one is started: the agent must run
// even if its old results are lost. This is the only package of the agent
// that imports bbolt.
package spool
