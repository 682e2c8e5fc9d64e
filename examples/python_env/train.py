"""Trains a small policy in Python on examples/rollout's C++ environment (reach_env): every step
comes back as reach_env.EnvStep, the class generated from env_step.yaml, sharing its tensors with
C++. REINFORCE with a mean baseline; exits 1 unless the trained policy beats the untrained one.

    PYTHONPATH=<build>/python:<build>/examples/python_env /usr/bin/python3 train.py [iterations]
"""
import sys

import torch

import reach_env

ENVS, STEPS = 64, 50


def collect(env, policy):
    """One rollout of STEPS steps in every environment: a stacked EnvStep [STEPS, ENVS] and the
    log-probabilities of the actions taken."""
    current = env.reset()
    steps, log_probs = [], []
    for _ in range(STEPS):
        dist = torch.distributions.Categorical(logits=policy(current.obs))
        action = dist.sample()
        log_probs.append(dist.log_prob(action))
        current = env.step(action)
        steps.append(current)
    return reach_env.EnvStep.stack(steps), torch.stack(log_probs)


def returns_of(rollout, gamma=0.95):
    out, running = torch.zeros_like(rollout.reward), torch.zeros(ENVS)
    for t in reversed(range(STEPS)):
        running = rollout.reward[t] + gamma * running * (~rollout.done[t]).float()
        out[t] = running
    return out


def main(iterations):
    torch.manual_seed(0)
    env = reach_env.ReachEnv(ENVS, episode_length=STEPS)
    policy = torch.nn.Sequential(torch.nn.Linear(4, 32), torch.nn.Tanh(), torch.nn.Linear(32, 3))
    optimizer = torch.optim.Adam(policy.parameters(), lr=0.02)
    mean_rewards = []
    for iteration in range(iterations):
        rollout, log_probs = collect(env, policy)
        assert isinstance(rollout, reach_env.EnvStep) and rollout.batch_size == torch.Size([STEPS, ENVS])
        returns = returns_of(rollout)
        advantage = (returns - returns.mean()) / (returns.std() + 1e-6)
        loss = -(log_probs * advantage).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        mean_rewards.append(rollout.reward.mean().item())
        print(f"iteration {iteration:3d}  mean reward {mean_rewards[-1]:+.3f}  loss {loss.item():+.4f}")
    first, last = sum(mean_rewards[:3]) / 3, sum(mean_rewards[-3:]) / 3
    print(f"mean reward: first iterations {first:+.3f}, last iterations {last:+.3f}")
    if not last > first + 0.05:
        print("the policy did not learn", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 40))
