"""Export round trip of the policy network: the NumPy runtime equals eager autograd_core, step by
step with the GRU state carried by the caller; the model file is checked against its config."""
import json

import numpy as np
import pytest

import autograd_core as ag
from autograd_core import runtime

from planner_pkg.policy.config import NetworkConfig, PolicyConfig
from planner_pkg.policy.export import PolicyModelError, export_policy, load_policy
from planner_pkg.policy.network import PolicyNet

SMALL = PolicyConfig().replace(network={"channels": [4, 8, 8], "hidden": 16, "velocity_prior_gain_per_s": 1.0})


def _net(cfg, seed=0):
    ag.manual_seed(seed)
    net = PolicyNet(cfg.network, cfg.observation)
    with ag.no_grad():  # make the head matter (it starts scaled down)
        net.fc.weight.mul_(10.0)
    return net


@pytest.mark.parametrize("cfg", [SMALL, PolicyConfig()], ids=["small", "paper"])
def test_runtime_matches_eager_over_a_sequence(tmp_path, cfg):
    net = _net(cfg)
    path = export_policy(net, cfg, tmp_path / "p.agm")
    loaded = load_policy(path)
    assert loaded.config == cfg
    rng = np.random.default_rng(0)
    h_rt = np.zeros((1, cfg.network.hidden), np.float32)
    h_eager = ag.zeros(1, cfg.network.hidden)
    net.eval()
    for _ in range(5):
        image = rng.uniform(-0.5, 3.0, (1, 1, 12, 16)).astype(np.float32)
        state = rng.normal(0, 2, (1, 10)).astype(np.float32)
        out_rt, h_rt = loaded.model(image, state, h_rt)
        with ag.no_grad():
            out_e, h_eager = net(ag.tensor(image), ag.tensor(state), h_eager)
        np.testing.assert_allclose(out_rt, out_e.numpy(), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(h_rt, h_eager.numpy(), rtol=1e-5, atol=1e-5)
    # the acceleration is squashed inside the limits
    assert np.all(np.abs(out_rt[0, :2]) <= cfg.network.max_accel_xy_mps2)


def test_paper_network_size():
    net = PolicyNet(NetworkConfig(), PolicyConfig().observation)
    assert sum(p.numel() for p in net.parameters()) == 514_496  # "~514 k parameters"


def test_model_file_is_plain_runtime_graph_with_policy_metadata(tmp_path):
    path = export_policy(_net(SMALL), SMALL, tmp_path / "p.agm")
    model = runtime.load(str(path))  # any runtime reads it
    assert model.input_names == ["image", "state", "hidden"]
    raw = path.read_bytes()
    n = int.from_bytes(raw[:8], "little")
    meta = json.loads(raw[8:8 + n])["__metadata__"]
    assert json.loads(meta["planner_pkg.policy"])["config"]["network"]["hidden"] == 16
    assert b"pickle" not in raw and raw[8:9] == b"{"


def test_load_refuses_mismatched_or_foreign_files(tmp_path):
    # a graph whose shapes do not match the configuration it carries
    other = SMALL.replace(network={"hidden": 24})
    net = _net(other)
    path = export_policy(net, other, tmp_path / "p.agm")
    raw = bytearray(path.read_bytes())
    n = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + n])
    meta = json.loads(header["__metadata__"]["planner_pkg.policy"])
    meta["config"]["network"]["hidden"] = 16
    header["__metadata__"]["planner_pkg.policy"] = json.dumps(meta)
    hb = json.dumps(header).encode()
    hb += b" " * (-len(hb) % 8)
    bad = tmp_path / "bad.agm"
    bad.write_bytes(len(hb).to_bytes(8, "little") + hb + bytes(raw[8 + n:]))
    with pytest.raises(PolicyModelError, match="configuration needs"):
        load_policy(bad)
    # a graph file without the policy metadata
    g = ag.export.trace(net.eval(), (ag.zeros(1, 1, 12, 16), ag.zeros(1, 10), ag.zeros(1, 24)))
    g.save(str(tmp_path / "plain.agc"))
    with pytest.raises(PolicyModelError, match="not a policy model"):
        load_policy(tmp_path / "plain.agc")
    (tmp_path / "junk.agm").write_bytes(b"\x00" * 3)
    with pytest.raises(PolicyModelError):
        load_policy(tmp_path / "junk.agm")
    with pytest.raises(PolicyModelError, match="cannot read"):
        load_policy(tmp_path / "missing.agm")
