// Package e2e drives the real vcon-server binary as a separate process:
// kills it while clients store, and at each crash point of each multi-step
// write, then checks that the next start repaired everything.
package e2e
