"""Which XLA options a training chunk compiles with: a network's, unless its env runs physics."""

import physics
from accelrl.envs import make_training_env
from accelrl.envs.registry import make, registered_names
from accelrl.fused import chunk_compiler_options
from physics.xla_cpu import NETWORK_COMPILE


def test_only_physics_envs_keep_the_process_settings_through_every_wrapper():
    wrapped = dict(max_steps=50, action_repeat=2, normalize_observation=True)
    for name in ("cartpole", "catch", "pendulum", "memory_cue"):
        env = make_training_env(name, 4, **wrapped)
        assert not env.unwrapped.steps_physics
        assert chunk_compiler_options(env) is NETWORK_COMPILE
    for name in ("ant", "reacher", "inverted_pendulum"):
        env = make_training_env(name, 4, **wrapped)
        assert env.unwrapped.steps_physics
        assert chunk_compiler_options(env) is None


def test_every_registered_env_built_on_physics_says_so():
    for name in registered_names():
        env = make(name)
        # an env built on the engine holds one of its Systems
        holds_system = any(isinstance(v, physics.System) for v in vars(env).values())
        assert env.steps_physics == holds_system, name
