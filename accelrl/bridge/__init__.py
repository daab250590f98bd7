"""The SEED actor bridge: CPU environments as remote actors over gRPC.

`actor` (with `codec`, `envs`, `grf`) is JAX-free; `server` holds the learner side. Nothing is
imported here, so `import accelrl.bridge.actor` pulls in no JAX.
"""
