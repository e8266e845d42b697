#!/usr/bin/python3
"""Per-seed PyTorch reference for bench/train_bench: the same kernel head, data
and hyperparameters, trained one seed at a time in a plain Python loop.

The model is the trainer's kernel head (worker/trainer/heads.cc): linear token
maps with a bias row, elu(z)+1 features of rank r, normalized attention
y_i = sum_j a_ij v_j / sum_j a_ij with a_ij = <phi_Q(x_i), phi_K(x_j)>, a
value map v(x) = V [x; 1], and the query-dependent affine readout
t_hat_i = <U [x_i; 1], y_i> + B [x_i; 1]. MSE on every scored position, Adam
(torch.optim.Adam), full batch, evaluation every eval_every steps.

Initial weights: by default the trainer's own SplitMix64 streams (rng.h), in
the same draw order, so seed s starts from the same weights as in C++ and the
per-seed results can be compared one to one. --init torch uses
torch.manual_seed instead (results then agree only in distribution).

The dataset comes from `ranksweep-train ... --dump-dataset FILE`.

  train_reference.py --dataset data.json [--counts 1,4,16,64] [--rank 16]
                     [--lr 0.01] [--max_steps 500] [--eval_every 50]
                     [--init splitmix|torch] [--threads N]

Prints one line per S, in train_bench's format (seed_steps_per_s counts
steps of single seeds).
"""

import argparse
import json
import math
import time

import torch

MASK64 = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15
STREAM_INIT = 2


class SplitMix64:
    """worker/trainer/rng.h's Rng."""

    def __init__(self, state):
        self.state = state & MASK64

    @classmethod
    def for_stream(cls, seed, tag):
        mixer = cls(seed ^ ((tag * GOLDEN) & MASK64))
        mixer.next()
        return cls(mixer.next() ^ tag)

    def next(self):
        self.state = (self.state + GOLDEN) & MASK64
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
        return z ^ (z >> 31)

    def uniform(self):
        return (self.next() >> 11) * 2.0**-53

    def below(self, n):
        """Uniform in [0, n) without modulo bias (Rng::Below)."""
        limit = MASK64 - MASK64 % n
        while True:
            x = self.next()
            if x < limit:
                return x % n

    def shuffle(self, v):
        """Rng::Shuffle, in place."""
        for i in range(len(v), 1, -1):
            j = self.below(i)
            v[i - 1], v[j] = v[j], v[i - 1]


def draw_uniform(rng, rows, cols, bound, init):
    if init == "torch":
        return (torch.rand(rows, cols) * 2 - 1) * bound
    values = [(2.0 * rng.uniform() - 1.0) * bound for _ in range(rows * cols)]
    return torch.tensor(values, dtype=torch.float32).view(rows, cols)


class KernelHead(torch.nn.Module):
    def __init__(self, m, rank, seed, init):
        super().__init__()
        if init == "torch":
            torch.manual_seed(seed)
        rng = SplitMix64.for_stream(seed, STREAM_INIT)
        bound = 1.0 / math.sqrt(m)
        # Same order as the C++ constructor: query map, key map, value, U, B.
        self.query_map = torch.nn.Parameter(draw_uniform(rng, m + 1, rank, bound, init))
        self.key_map = torch.nn.Parameter(draw_uniform(rng, m + 1, rank, bound, init))
        self.value = torch.nn.Parameter(draw_uniform(rng, m + 1, m, bound, init))
        self.readout_u = torch.nn.Parameter(draw_uniform(rng, m + 1, m, bound, init))
        self.readout_b = torch.nn.Parameter(draw_uniform(rng, m + 1, 1, bound, init))

    def forward(self, x):  # x: [B, N, m] -> [B, N]
        xa = torch.cat([x, torch.ones_like(x[..., :1])], -1)
        phi_q = torch.nn.functional.elu(xa @ self.query_map) + 1
        phi_k = torch.nn.functional.elu(xa @ self.key_map) + 1
        alpha = phi_q @ phi_k.transpose(1, 2)  # [B, N, N]
        y = (alpha @ (xa @ self.value)) / alpha.sum(-1, keepdim=True).clamp_min(1e-30)
        return ((xa @ self.readout_u) * y).sum(-1) + (xa @ self.readout_b).squeeze(-1)


def load(path):
    with open(path) as f:
        d = json.load(f)
    m = d["m"]
    tokens = torch.tensor(d["train"]["tokens"], dtype=torch.int64)
    x = ((tokens.unsqueeze(-1) >> torch.arange(m)) & 1).float()
    t = torch.tensor(d["train"]["targets"], dtype=torch.float32)
    scored = torch.ones(d["seq_len"])
    if d["final_query_only"]:
        scored.zero_()
        scored[-1] = 1
    return m, x, t, scored


def train_one(seed, m, x, t, scored, args):
    model = KernelHead(m, args.rank, seed, args.init).to(args.device)
    opt = torch.optim.Adam(model.parameters(), lr=args.lr, betas=(0.9, 0.999), eps=1e-8)
    n_scored = scored.sum() * x.shape[0]
    error = None
    for step in range(args.max_steps):
        out = model(x)
        loss = (((out - t) ** 2) * scored).sum() / n_scored
        opt.zero_grad()
        loss.backward()
        opt.step()
        if (step + 1) % args.eval_every == 0 or step + 1 == args.max_steps:
            with torch.no_grad():
                right = (torch.round(model(x)) == t) | (scored == 0)
                error = 1.0 - right.all(-1).float().mean().item()
    return error


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--dataset", required=True)
    p.add_argument("--counts", default="1,4,16,64")
    p.add_argument("--rank", type=int, default=16)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--max_steps", type=int, default=500)
    p.add_argument("--eval_every", type=int, default=50)
    p.add_argument("--init", choices=["splitmix", "torch"], default="splitmix")
    p.add_argument("--threads", type=int, default=0, help="torch.set_num_threads; 0 = default")
    p.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N")
    args = p.parse_args()
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    m, x, t, scored = load(args.dataset)
    x, t, scored = x.to(args.device), t.to(args.device), scored.to(args.device)
    cuda = args.device.startswith("cuda")
    for s_count in [int(c) for c in args.counts.split(",")]:
        start = time.perf_counter()
        errors = [train_one(seed, m, x, t, scored, args) for seed in range(s_count)]
        if cuda:
            torch.cuda.synchronize()
        wall = time.perf_counter() - start
        exact = sum(e == 0.0 for e in errors)
        print("S=%d models_per_s=%.3f seed_steps_per_s=%.1f wall_s=%.3f exact=%d/%d errors=%s"
              % (s_count, s_count / wall, s_count * args.max_steps / wall, wall, exact, s_count,
                 ",".join(repr(e) for e in errors)), flush=True)


if __name__ == "__main__":
    main()
