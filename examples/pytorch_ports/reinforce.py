"""Policy-gradient learning in the style of PyTorch's reinforcement_learning REINFORCE
example: a policy network gives a torch.distributions.Categorical over actions, sampled
actions' log_prob times the normalised discounted return is the loss, Adam steps it. The
environment is a small corridor walk written here (no gym needed).

Written for PyTorch; runs on singa_tensor with only the imports changed.
"""

import os

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.distributions import Categorical

STEPS = int(os.environ.get("PORT_STEPS", "30"))
EPS = np.finfo(np.float32).eps.item()


def sync_init(model, name="model"):
    """The same initial weights in both libraries (bench/bench_ports.py)."""
    save, load = os.environ.get("PORT_SAVE_INIT"), os.environ.get("PORT_LOAD_INIT")
    if save:
        np.savez(f"{save}.{name}.npz", **{k: v.detach().cpu().numpy()
                                          for k, v in model.state_dict().items()})
    if load:
        with np.load(f"{load}.{name}.npz") as f:
            model.load_state_dict({k: torch.tensor(f[k]) for k in f.files})


class Corridor:
    """Start in the middle of 7 cells; step left or right; reward 1 at the right end."""

    def reset(self):
        self.pos, self.t = 3, 0
        return self._obs()

    def _obs(self):
        o = np.zeros(7, np.float32)
        o[self.pos] = 1.0
        return o

    def step(self, action):
        self.pos = max(0, min(6, self.pos + (1 if action == 1 else -1)))
        self.t += 1
        done = self.pos == 6 or self.t >= 20
        return self._obs(), (1.0 if self.pos == 6 else -0.01), done


class Policy(nn.Module):
    def __init__(self):
        super().__init__()
        self.affine1 = nn.Linear(7, 32)
        self.dropout = nn.Dropout(p=float(os.environ.get("PORT_DROPOUT", "0.0")))
        self.affine2 = nn.Linear(32, 2)
        self.saved_log_probs, self.rewards = [], []

    def forward(self, x):
        x = F.relu(self.dropout(self.affine1(x)))
        return F.softmax(self.affine2(x), dim=1)


def main():
    torch.manual_seed(0)
    rng = np.random.default_rng(12)
    env, policy = Corridor(), Policy()
    sync_init(policy)
    optimizer = optim.Adam(policy.parameters(), lr=1e-2)
    gamma = 0.99
    for episode in range(STEPS):
        state, done = env.reset(), False
        while not done:
            probs = policy(torch.from_numpy(state).float().unsqueeze(0))
            m = Categorical(probs)
            # the action is drawn from numpy with the policy's probabilities, so that both
            # libraries take the same path; log_prob is the library's
            action = torch.tensor([int(rng.random() < probs[0, 1].item())])
            policy.saved_log_probs.append(m.log_prob(action))
            state, reward, done = env.step(action.item())
            policy.rewards.append(reward)
        R, returns = 0.0, []
        for r in policy.rewards[::-1]:
            R = r + gamma * R
            returns.insert(0, R)
        returns = torch.tensor(returns)
        returns = (returns - returns.mean()) / (returns.std() + EPS)
        policy_loss = torch.cat([-lp * R for lp, R in zip(policy.saved_log_probs, returns)])
        optimizer.zero_grad()
        loss = policy_loss.sum()
        loss.backward()
        optimizer.step()
        print(f"loss {episode} {loss.item():.10f} length {len(policy.rewards)}")
        del policy.rewards[:], policy.saved_log_probs[:]


if __name__ == "__main__":
    main()
