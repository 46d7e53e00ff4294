"""Training the models that route, from public data only (never the seed sets or the bench probes)."""
