"""Shared test settings: small CPU-only runs."""

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")
