"""pytorch/examples reinforcement_learning/reinforce, re-written with a small built-in cart-pole:
a Policy net with dropout and softmax, Categorical sampling and log_prob, discounted returns
collected in a collections.deque and turned into a tensor, normalised, and an Adam step."""
import collections

import numpy as np
import autograd_core as torch
import autograd_core.nn as nn
import autograd_core.nn.functional as F
import autograd_core.optim as optim
from autograd_core.distributions import Categorical


class CartPole:
    """Euler-integrated cart-pole with the classic constants; reward 1 per step upright."""

    def __init__(self, seed):
        self.rng = np.random.RandomState(seed)

    def reset(self):
        self.s = self.rng.uniform(-0.05, 0.05, 4)
        return self.s.copy()

    def step(self, action):
        x, x_dot, th, th_dot = self.s
        force = 10.0 if action == 1 else -10.0
        ct, st = np.cos(th), np.sin(th)
        temp = (force + 0.05 * th_dot ** 2 * st) / 1.1
        th_acc = (9.8 * st - ct * temp) / (0.5 * (4.0 / 3.0 - 0.1 * ct ** 2 / 1.1))
        x_acc = temp - 0.05 * th_acc * ct / 1.1
        self.s = np.array([x + 0.02 * x_dot, x_dot + 0.02 * x_acc, th + 0.02 * th_dot, th_dot + 0.02 * th_acc])
        done = abs(self.s[0]) > 2.4 or abs(self.s[2]) > 0.2095
        return self.s.copy(), 1.0, done


class Policy(nn.Module):
    def __init__(self, p=0.6):
        super(Policy, self).__init__()
        self.affine1 = nn.Linear(4, 32)
        self.dropout = nn.Dropout(p=p)
        self.affine2 = nn.Linear(32, 2)
        self.saved_log_probs = []
        self.rewards = []

    def forward(self, x):
        x = self.affine1(x)
        x = self.dropout(x)
        x = F.relu(x)
        action_scores = self.affine2(x)
        return F.softmax(action_scores, dim=1)


def main(init=None, episodes=3, p=0.6, gamma=0.99):
    env = CartPole(543)
    torch.manual_seed(543)
    policy = Policy(p)
    if init is not None:
        policy.load_state_dict({k: torch.tensor(v) for k, v in init.items()})
    start = {k: v.detach().numpy().copy() for k, v in policy.state_dict().items()}
    optimizer = optim.Adam(policy.parameters(), lr=1e-2)
    eps = np.finfo(np.float32).eps.item()

    def select_action(state):
        state = torch.from_numpy(state).float().unsqueeze(0)
        probs = policy(state)
        m = Categorical(probs)
        action = m.sample()
        policy.saved_log_probs.append(m.log_prob(action))
        return action.item()

    def finish_episode():
        R = 0
        policy_loss = []
        returns = collections.deque()
        for r in policy.rewards[::-1]:
            R = r + gamma * R
            returns.appendleft(R)
        returns = torch.tensor(returns)
        returns = (returns - returns.mean()) / (returns.std() + eps)
        for log_prob, R in zip(policy.saved_log_probs, returns):
            policy_loss.append(-log_prob * R)
        optimizer.zero_grad()
        policy_loss = torch.cat(policy_loss).sum()
        policy_loss.backward()
        optimizer.step()
        del policy.rewards[:]
        del policy.saved_log_probs[:]
        return policy_loss.item()

    running_reward = 10
    lengths, losses = [], []
    for i_episode in range(episodes):
        state, ep_reward = env.reset(), 0
        for t in range(1, 60):
            action = select_action(state)
            state, reward, done = env.step(action)
            policy.rewards.append(reward)
            ep_reward += reward
            if done:
                break
        running_reward = 0.05 * ep_reward + (1 - 0.05) * running_reward
        lengths.append(t)
        losses.append(finish_episode())
    return {"lengths": lengths, "losses": losses, "running_reward": running_reward,
            "affine2": policy.affine2.weight.detach().numpy(), "init": start}


if __name__ == "__main__":
    r = main()
    print("episode lengths", r["lengths"], "running reward", r["running_reward"])
