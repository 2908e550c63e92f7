package main

import (
	"testing"
	"time"
)

// The stop window after a preStop hook, as killContainer computes it (kuberuntime_container.go at
// v1.34): grace less the hook's whole seconds, at least minimumGracePeriodInSeconds (2 s).
func TestStopWindow(t *testing.T) {
	for _, row := range []struct {
		name            string
		grace, hookTook time.Duration
		want            time.Duration
	}{
		{"no hook", 30 * time.Second, 0, 30 * time.Second},
		{"hook took 5.9 s: whole seconds are subtracted", 30 * time.Second, 5900 * time.Millisecond, 25 * time.Second},
		{"hook took 0.4 s: nothing subtracted", 30 * time.Second, 400 * time.Millisecond, 30 * time.Second},
		{"hook used up the grace period: the 2 s floor", 30 * time.Second, 30 * time.Second, 2 * time.Second},
		{"hook left 1 s: the 2 s floor", 30 * time.Second, 29 * time.Second, 2 * time.Second},
		{"grace 0: the 2 s floor", 0, 0, 2 * time.Second},
		{"grace 1 s: the 2 s floor", time.Second, 0, 2 * time.Second},
	} {
		if got := stopWindow(row.grace, row.hookTook); got != row.want {
			t.Errorf("%s: stopWindow(%s, %s) = %s, want %s", row.name, row.grace, row.hookTook, got, row.want)
		}
	}
}
