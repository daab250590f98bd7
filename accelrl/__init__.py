"""accelrl: accelerator-resident reinforcement learning.

Kept free of heavy imports so that light parts (the bridge actor) import without JAX.
"""

__version__ = "0.1.0"
