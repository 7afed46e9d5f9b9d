"""What every app stands on: the embedded PostgreSQL and Redis, shared querysets, the crypto of secrets at rest, the worker pool's heartbeats, the migrations' state. Imports no app."""
