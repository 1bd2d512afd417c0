// Package redisconn is how Sluice's commands reach Redis: a URL read
// (redis://, redis+cluster://, redis+sentinel://, and rediss for TLS, with
// the CA file of SLUICE_REDIS_CA_FILE), a client made from it, and, when
// connecting fails, one line that says why (a closed port, TLS against
// plain text, a refused password, a master Sentinel does not know). A
// bad URL matches cli.ErrUsage, so that the command exits 2.
package redisconn
