"""Google Research Football's academy_empty_goal_close through the bridge (needs `make grf`)."""

import importlib.util

import pytest
from bridge_helpers import actor, serve, updates

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("gfootball") is None,
    reason="gfootball is not installed (build it with `make grf`)",
)


def test_grf_empty_goal_close_through_bridge(tmp_path):
    server, port = serve(tmp_path / "run", "total_env_steps=100000000", preset="grf_vtrace_bridge")
    worker = actor(port, num_envs=2, env="grf:academy_empty_goal_close")
    try:
        server.wait_for(r"update\s+\d+", 300)
        assert worker.alive() and updates(server)
    finally:
        worker.kill()
        server.kill()
