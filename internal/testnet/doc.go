// Package testnet holds the helpers that tests of several packages share
// to run real tools on the loopback network: a port free for TCP and UDP
// (FreePort), a throwaway network namespace (NewNetNS, which skips
// without root), skipping a test when a tool or the time for it is missing
// (Need, NeedTools), and a context bounded by a timeout (Ctx).
//
// Every helper takes the test's testing.TB, fails or skips through it,
// and registers its own cleanup with TB.Cleanup, so a caller has nothing
// to undo. Only test files import this package.
package testnet
