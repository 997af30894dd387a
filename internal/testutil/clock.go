package testutil

import (
	"sync"
	"time"
)

// Clock is a clock that moves only when told, for code that takes a Now
// func (a Config.Now): pass c.Now. Its methods are safe for concurrent
// use; the zero Clock stands at the zero time.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock returns a Clock that stands at start.
func NewClock(start time.Time) *Clock { return &Clock{now: start} }

// Now returns the time the clock stands at.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Add moves the clock by d (back when d is negative).
func (c *Clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}
