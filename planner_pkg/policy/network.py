"""The policy network: depth CNN + state embedding -> GRUCell -> acceleration and velocity estimate.

As in "Back to Newton's Laws" (Zhang et al. 2024): conv 1->C1 (k2 s2), C1->C2 (k3), C2->C3 (k3),
LeakyReLU(0.05) after each, flatten -> Linear(hidden); the state vector's Linear(hidden) embedding
is added, LeakyReLU, GRUCell(hidden), LeakyReLU, Linear(hidden -> 6). The first three outputs are
the commanded acceleration in the yaw frame, squashed per axis to ``m tanh(raw / m)`` so it stays
inside the flight controller's limits; the last three are the auxiliary velocity estimate (yaw
frame, m/s). With ``velocity_prior_gain_per_s`` > 0 the acceleration head is a correction to
``gain * (target velocity - velocity)`` plus, horizontally, ``velocity_prior_drag_per_s * target
velocity`` (a departure from the paper, see NetworkConfig). The GRU state is an explicit input
and output, so the exported graph runs one step per call on board (``autograd_core.runtime``)
with the caller holding the state.

With ``NetworkConfig.fine_branch`` the CNN above reads the image max-pooled by 2 and a second CNN
of the same shape (``fine_stem``, its last linear layer zero at the start) reads the full image;
the two embeddings are added before the state's.

Inputs: image (B, 1, rows, cols) float32 (see ``observation.depth_observation``), state
(B, STATE_DIM) float32, hidden (B, hidden) float32. Outputs: (B, 6) float32, (B, hidden).
"""
from __future__ import annotations

import numpy as np

import autograd_core as ag
import autograd_core.nn as nn

from planner_pkg.policy.config import NetworkConfig, ObservationConfig, STATE_DIM, cnn_input_sizes

__all__ = ["PolicyNet", "conv_output_hw"]


def conv_output_hw(image_hw):
    """Spatial size after the three convolutions (k2 s2, k3, k3, no padding)."""
    h, w = image_hw
    h, w = (h - 2) // 2 + 1, (w - 2) // 2 + 1
    h, w = h - 4, w - 4
    if h < 1 or w < 1:
        raise ValueError(f"a {image_hw[1]}x{image_hw[0]} image is too small for the policy CNN (needs >= 10x10)")
    return h, w


def _cnn(c1: int, c2: int, c3: int, hidden: int, slope: float, image_hw) -> "nn.Sequential":
    """conv 1->c1 (k2 s2), c1->c2 (k3), c2->c3 (k3), LeakyReLU after each, flatten, Linear(hidden)."""
    oh, ow = conv_output_hw(image_hw)
    return nn.Sequential(
        nn.Conv2d(1, c1, 2, 2, bias=False), nn.LeakyReLU(slope),
        nn.Conv2d(c1, c2, 3, bias=False), nn.LeakyReLU(slope),
        nn.Conv2d(c2, c3, 3, bias=False), nn.LeakyReLU(slope),
        nn.Flatten(),
        nn.Linear(c3 * oh * ow, hidden, bias=False),
    )


class PolicyNet(nn.Module):
    """CNN + GRU policy (module docstring). ``forward(image, state, hidden) -> (out, hidden)``."""

    def __init__(self, net: NetworkConfig = NetworkConfig(), obs: ObservationConfig = ObservationConfig()):
        super().__init__()
        c1, c2, c3 = net.channels
        hidden = net.hidden
        slope = net.leaky_slope
        rows, cols = obs.image_hw
        self.fine_branch = bool(net.fine_branch)
        if self.fine_branch and (rows % 2 or cols % 2):
            raise ValueError(f"network.fine_branch needs an even image size, got {cols}x{rows}")
        sizes = cnn_input_sizes(net, obs)
        self.stem = _cnn(c1, c2, c3, hidden, slope, sizes[0])
        if self.fine_branch:
            self.coarse_pool = nn.MaxPool2d(2)
            self.fine_stem = _cnn(c1, c2, c3, hidden, slope, sizes[1])
            with ag.no_grad():  # the full image comes in as training moves these weights
                self.fine_stem[7].weight.zero_()
        self.v_proj = nn.Linear(STATE_DIM, hidden)
        self.gru = nn.GRUCell(hidden, hidden)
        self.fc = nn.Linear(hidden, 6, bias=False)
        self.act = nn.LeakyReLU(slope)
        scale = np.array([[net.max_accel_xy_mps2, net.max_accel_xy_mps2, net.max_accel_z_mps2]], dtype=np.float32)
        self.register_buffer("accel_scale", ag.tensor(scale))
        self.register_buffer("accel_inv_scale", ag.tensor(1.0 / scale))
        # small initial outputs: start close to hover, so early rollouts do not fly off at once
        with ag.no_grad():
            self.fc.weight.mul_(0.1)
        self.hidden = hidden
        self.velocity_gain = float(net.velocity_prior_gain_per_s)
        self.velocity_drag = float(net.velocity_prior_drag_per_s)
        if self.velocity_drag:
            self.register_buffer("drag_feedforward", ag.tensor(np.array([[self.velocity_drag, self.velocity_drag, 0.0]],
                                                                        dtype=np.float32)))

    def _features(self, image):
        """The image embedding (B, hidden): the CNN's, or with ``fine_branch`` the coarse CNN's on
        the 2 x 2 max-pooled image plus the fine CNN's on the image itself."""
        if self.fine_branch:
            return self.stem(self.coarse_pool(image)) + self.fine_stem(image)
        return self.stem(image)

    def _recurrent(self, stem, state, hidden):
        """GRU step from the image features ``stem`` and the state: (raw 6 outputs, hidden)."""
        hidden = self.gru(self.act(stem + self.v_proj(state)), hidden)
        return self.fc(self.act(hidden)), hidden

    def forward(self, image, state, hidden):
        raw, hidden = self._recurrent(self._features(image), state, hidden)
        return self._output(raw, state), hidden

    def forward_training(self, image, state, const_state, hidden, hidden_const):
        """Training step whose velocity estimate does not depend on the differentiable state.

        ``state`` (its velocity entries attached to the simulation) drives the command as in
        :meth:`forward`; ``const_state`` (the same values, no gradient to the simulation) feeds a
        second recurrent pass, with its own GRU state ``hidden_const``, whose last three outputs
        are the estimate. The image features are shared (the image is a constant). Returns
        (output (B, 6): command from the first pass, estimate from the second; hidden; hidden_const).
        """
        stem = self._features(image)
        raw, hidden = self._recurrent(stem, state, hidden)
        raw_c, hidden_const = self._recurrent(stem, const_state, hidden_const)
        out = self._output(raw, state)
        return ag.cat([out[:, 0:3], raw_c[:, 3:6]], dim=1), hidden, hidden_const

    def _output(self, raw, state):
        head = raw[:, 0:3]
        if self.velocity_gain:  # correction to a proportional velocity controller (NetworkConfig)
            head = head + (state[:, 3:6] - state[:, 0:3]) * self.velocity_gain
        if self.velocity_drag:  # drag feed-forward: the prior alone holds the target speed (NetworkConfig)
            head = head + state[:, 3:6] * self.drag_feedforward
        accel = ag.tanh(head * self.accel_inv_scale) * self.accel_scale
        return ag.cat([accel, raw[:, 3:6]], dim=1)

    def initial_hidden(self, batch: int):
        """Zero GRU state (batch, hidden) float32."""
        return ag.zeros(batch, self.hidden)
