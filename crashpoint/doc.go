// Package crashpoint lets tests kill the process at named points of every
// multi-step write, to prove that the next start repairs what is left.
// Only a binary built with -tags crashpoints has them; in every other
// build Hit is an empty function.
package crashpoint

// EnvVar names the point to die at, in a crashpoints build.
const EnvVar = "VCON_SERVER_CRASH_AT"

// The points, in the order their operation passes them.
const (
	StoreAfterObject    = "store-after-object"    // object durable, catalog row not committed
	StoreAfterCommit    = "store-after-commit"    // row committed, answer not sent
	PurgeAfterKey       = "purge-after-key"       // data key destroyed and checkpointed
	PurgeAfterTombstone = "purge-after-tombstone" // tombstone written
	PurgeAfterDelete    = "purge-after-delete"    // bytes deleted, purge not recorded done
)
