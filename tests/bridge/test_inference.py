"""Bridge inference: outputs and acting carries come back as one packed array, cut per env."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from accelrl.bridge.inference import Inference


def _policy_step(params, carry, inputs, constants, key):
    """A counter per slot as the carry; outputs of three dtypes and shapes."""
    del constants
    count = jnp.where(inputs["is_first"], 0, carry["count"][:, 0]) + 1
    noise = jax.random.uniform(key, count.shape)
    outputs = {
        "action": (inputs["observation"][:, 0] * params).astype(jnp.int32),
        "vector": jnp.stack([count, -count], axis=1).astype(jnp.float32),
        "noise": noise,
    }
    return {"count": count[:, None]}, outputs


def test_packed_outputs_carries_and_padding():
    inference = Inference(_policy_step, lambda b: {"count": jnp.zeros((b, 1), jnp.int32)}, 8, 4)

    def inputs(obs, first):
        return {"observation": np.asarray(obs, np.float32)[:, None], "is_first": np.asarray(first)}

    example = lambda m: inputs(np.zeros(m), np.ones(m, bool))  # noqa: E731
    inference.warm_up(jnp.float32(2.0), example)
    slots = np.array([5, 2, 7], np.int32)  # 3 rows: padded to the bucket of 4
    first = inference.act(jnp.float32(2.0), slots, inputs([1.0, 2.0, 3.0], [True] * 3))
    outputs, carry0 = first.rows(0, 3)
    np.testing.assert_array_equal(outputs["action"], [2, 4, 6])
    assert outputs["action"].dtype == np.int32 and outputs["vector"].shape == (3, 2)
    np.testing.assert_array_equal(outputs["vector"], [[1, -1]] * 3)
    # the carries stayed on the device per slot: the second step counts 2, from carry0 = 1
    second = inference.act(jnp.float32(2.0), slots[1:], inputs([4.0, 5.0], [False, False]))
    outputs, carry0 = second.rows(0, 2)
    np.testing.assert_array_equal(outputs["vector"][:, 0], [2, 2])
    np.testing.assert_array_equal(carry0["count"][:, 0], [1, 1])
    np.testing.assert_array_equal(second.rows(1, 2)[0]["action"], [10])
    # a fresh key each batch: the noise differs between batches
    assert not np.array_equal(first.rows(0, 2)[0]["noise"], outputs["noise"])


def test_each_published_params_object_is_used_and_checked():
    """Parameters go in as leaves flattened once per object: a new object (a newly published
    version) acts with its own values; one of another structure, or other inputs, is an error."""
    step = lambda p, carry, inputs, constants, key: (  # noqa: E731
        carry,
        {"action": (inputs["observation"][:, 0] * p["w"]["scale"] + p["b"]).astype(jnp.int32)},
    )
    inference = Inference(step, lambda b: (), 4, 2)
    obs = {"observation": np.ones((2, 1), np.float32), "is_first": np.ones(2, bool)}
    slots = np.array([0, 1], np.int32)
    v1 = {"w": {"scale": jnp.float32(3.0)}, "b": jnp.float32(1.0)}
    v2 = {"w": {"scale": jnp.float32(5.0)}, "b": jnp.float32(0.0)}
    action = lambda params: inference.act(params, slots, obs).rows(0, 2)[0]["action"]  # noqa: E731
    np.testing.assert_array_equal(action(v1), [4, 4])
    np.testing.assert_array_equal(action(v2), [5, 5])
    np.testing.assert_array_equal(action(v1), [4, 4])
    with pytest.raises(ValueError, match="parameters changed structure"):
        action({"w": jnp.float32(3.0), "b": jnp.float32(1.0)})
    with pytest.raises(ValueError, match="inputs"):
        inference.act(v1, slots, {"observation": obs["observation"]})
