"""Issue 3 must-show 3: a small CNN learns a synthetic image task, and the same run in torch
(float64, identical initial weights, identical batches) follows the same loss curve to 1e-6."""
import numpy as np
import pytest

import autograd_core as ag

torch = pytest.importorskip("torch")


def _bars_dataset(n, seed):
    """8×8 images with one bright bar: class = 0 horizontal-top, 1 horizontal-bottom,
    2 vertical-left, 3 vertical-right; plus Gaussian noise."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 4, n)
    x = rng.normal(0.0, 0.3, (n, 1, 8, 8))
    for i, c in enumerate(y):
        k = rng.integers(0, 4)
        if c == 0:
            x[i, 0, k, :] += 1.0
        elif c == 1:
            x[i, 0, 4 + k, :] += 1.0
        elif c == 2:
            x[i, 0, :, k] += 1.0
        else:
            x[i, 0, :, 4 + k] += 1.0
    return x, y


def _net(lib):
    nn = lib.nn
    return nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(8, 8, 3),
                         nn.LeakyReLU(0.05), nn.Flatten(), nn.Linear(8 * 2 * 2, 4)).double()


def _train(lib, model, x, y, steps, batch):
    opt = lib.optim.Adam(model.parameters(), lr=0.01)
    loss_fn = lib.nn.CrossEntropyLoss()
    losses = []
    for step in range(steps):
        idx = np.arange(step * batch, (step + 1) * batch) % len(y)
        xb = lib.tensor(x[idx], dtype=lib.float64)
        yb = lib.tensor(y[idx], dtype=lib.int64)
        opt.zero_grad()
        loss = loss_fn(model(xb), yb)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def test_small_cnn_learns_and_matches_torch_loss_curve():
    x, y = _bars_dataset(512, seed=0)
    xt, yt = _bars_dataset(256, seed=1)
    ag.manual_seed(0)
    ours = _net(ag)
    theirs = _net(torch)
    theirs.load_state_dict({k: torch.tensor(v.detach().numpy()) for k, v in ours.state_dict().items()})

    lo = _train(ag, ours, x, y, steps=120, batch=32)
    lt = _train(torch, theirs, x, y, steps=120, batch=32)
    np.testing.assert_allclose(lo, lt, rtol=1e-6, atol=1e-6)

    with ag.no_grad():
        pred = ours(ag.tensor(xt, dtype=ag.float64)).argmax(1).numpy()
    accuracy = (pred == yt).mean()
    assert lo[0] > 1.2  # ~ln 4 at the start
    assert accuracy >= 0.95, f"held-out accuracy {accuracy:.3f}"
