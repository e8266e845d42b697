#!/usr/bin/python3
"""Batched PyTorch peer for bench/roofline_bench: the trainer's minibatch task
(kernel or softmax head, MSE) with all seeds in one program, written as a
researcher would: parameters stacked on a seed dimension, batched products
(torch.bmm), the sum of the seeds' mean losses, one torch.optim.Adam.

Same model, initial weights and minibatches as the C++ trainer, so the results
compare seed by seed:
  * weights: the trainer's SplitMix64 init streams (worker/trainer/rng.h) in
    the draw order of its constructors (bench/train_reference.py has the
    per-seed version of the same replay);
  * minibatches: each seed's own SplitMix64 batch stream, a Fisher-Yates
    shuffle of the training set every epoch, the last partial batch dropped
    (worker/trainer/fused_trainer.cc, BatchOrder).
The minibatch indices of every step are drawn before the clock starts (the
C++ trainer draws them in microseconds; Python would not).

The dataset comes from `ranksweep-train --spec TASK --dump-dataset FILE`.

  roofline_reference.py --dataset data.json --head kernel --rank 16 --seeds 10
                        --batch 2048 --warmup 2 --steps 20 [--threads 1]

Prints one line: head=.. rank=.. S=.. step_s=<seconds per fused step, mean
over --steps after --warmup> errors=<per-seed training error after
warmup + steps steps> losses=<per-seed mean training loss then>.
"""

import argparse
import json
import math
import time

import torch

import sys

sys.dont_write_bytecode = True  # no __pycache__ in bench/ from the import below
# The per-seed reference's replay of the trainer's SplitMix64 streams and data.
import train_reference  # noqa: E402
from train_reference import STREAM_INIT, SplitMix64  # noqa: E402

STREAM_BATCHES = 3


def draw(rngs, rows, cols, bound):
    """[S, rows, cols], uniform in +-bound, seed by seed (DrawUniform)."""
    out = []
    for rng in rngs:
        values = [(2.0 * rng.uniform() - 1.0) * bound for _ in range(rows * cols)]
        out.append(torch.tensor(values, dtype=torch.float32).view(rows, cols))
    return torch.stack(out)


def batch_order(seeds, size, batch, steps):
    """[steps, S, batch] int64: BatchOrder::Next for every step."""
    rngs = [SplitMix64.for_stream(s, STREAM_BATCHES) for s in seeds]
    perms = [list(range(size)) for _ in seeds]
    cursor = [size] * len(seeds)
    out = torch.empty(steps, len(seeds), batch, dtype=torch.int64)
    for step in range(steps):
        for s, rng in enumerate(rngs):
            if cursor[s] + batch > size:
                perms[s] = list(range(size))
                rng.shuffle(perms[s])
                cursor[s] = 0
            out[step, s] = torch.tensor(perms[s][cursor[s]:cursor[s] + batch])
            cursor[s] += batch
    return out


class Batched(torch.nn.Module):
    """All seeds' heads; every parameter [S, ...] as in worker/trainer/heads.cc."""

    def __init__(self, head, m, rank, seeds):
        super().__init__()
        self.head = head
        rngs = [SplitMix64.for_stream(s, STREAM_INIT) for s in seeds]
        bound = 1.0 / math.sqrt(m)
        p = torch.nn.Parameter
        if head == "kernel":  # order: query map, key map, value, U, B
            self.wq = p(draw(rngs, m + 1, rank, bound))
            self.wk = p(draw(rngs, m + 1, rank, bound))
        else:  # softmax: w_q, w_k (no bias rows), inv_tau, value, U, B
            self.wq = p(draw(rngs, m, m, bound))
            self.wk = p(draw(rngs, m, m, bound))
            self.inv_tau = p(torch.full((len(seeds),), 0.1))
        self.value = p(draw(rngs, m + 1, m, bound))
        self.readout_u = p(draw(rngs, m + 1, m, bound))
        self.readout_b = p(draw(rngs, m + 1, 1, bound))

    def forward(self, xa):
        """xa: [S, B, N, m+1] tokens with a ones column -> [S, B, N]."""
        s, b, n, m1 = xa.shape
        flat = xa.reshape(s, b * n, m1)
        if self.head == "kernel":
            fq = torch.nn.functional.elu(torch.bmm(flat, self.wq)) + 1
            fk = torch.nn.functional.elu(torch.bmm(flat, self.wk)) + 1
            alpha = torch.bmm(fq.view(s * b, n, -1), fk.view(s * b, n, -1).transpose(1, 2))
            v = torch.bmm(flat, self.value).view(s * b, n, -1)
            y = torch.bmm(alpha, v) / alpha.sum(-1, keepdim=True).clamp_min(1e-30)
        else:
            x = flat[..., :m1 - 1]
            q = torch.bmm(x, self.wq).view(s * b, n, -1)
            k = torch.bmm(x, self.wk).view(s * b, n, -1)
            scores = torch.bmm(q, k.transpose(1, 2)).view(s, b * n, n)
            w = torch.softmax(scores * self.inv_tau.view(s, 1, 1), -1).view(s * b, n, n)
            y = torch.bmm(w, torch.bmm(flat, self.value).view(s * b, n, -1))
        u = torch.bmm(flat, self.readout_u)
        out = (u * y.view(s, b * n, -1)).sum(-1) + torch.bmm(flat, self.readout_b).squeeze(-1)
        return out.view(s, b, n)


def load(path):
    """train_reference.load with a ones column: xa [B, N, m+1]."""
    m, x, t, scored = train_reference.load(path)
    return m, torch.cat([x, torch.ones_like(x[..., :1])], -1), t, scored


def evaluate(model, xa, t, scored, chunk=4096):
    """Per-seed exact-sequence error and mean loss over the whole split."""
    s = model.value.shape[0]
    wrong = torch.zeros(s, dtype=torch.float64)
    loss = torch.zeros(s, dtype=torch.float64)
    with torch.no_grad():
        for start in range(0, xa.shape[0], chunk):
            x = xa[start:start + chunk].unsqueeze(0).expand(s, -1, -1, -1)
            tt = t[start:start + chunk]
            out = model(x)
            right = (torch.round(out) == tt) | (scored == 0)
            wrong += (~right.all(-1)).sum(-1).double()
            loss += (((out - tt) ** 2) * scored).sum((1, 2)).double()
    n = xa.shape[0]
    return (wrong / n).tolist(), (loss / (n * scored.sum().item())).tolist()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--dataset", required=True)
    p.add_argument("--head", choices=["kernel", "softmax"], default="kernel")
    p.add_argument("--rank", type=int, default=16)
    p.add_argument("--seeds", type=int, default=10)
    p.add_argument("--batch", type=int, default=2048, help="0: full batch")
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--threads", type=int, default=0, help="torch.set_num_threads; 0 = default")
    args = p.parse_args()
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    m, xa, t, scored = load(args.dataset)
    seeds = list(range(args.seeds))
    size = xa.shape[0]
    batch = size if args.batch == 0 or args.batch >= size else args.batch
    total = args.warmup + args.steps
    order = batch_order(seeds, size, batch, total)
    model = Batched(args.head, m, args.rank, seeds)
    opt = torch.optim.Adam(model.parameters(), lr=args.lr, betas=(0.9, 0.999), eps=1e-8)
    weight = scored / (batch * scored.sum())
    s = len(seeds)
    start = None
    for step in range(total):
        if step == args.warmup:
            start = time.perf_counter()
        idx = order[step]  # [S, batch]
        x = xa.index_select(0, idx.reshape(-1)).view(s, batch, xa.shape[1], -1)
        tt = t.index_select(0, idx.reshape(-1)).view(s, batch, -1)
        loss = (((model(x) - tt) ** 2) * weight).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
    step_s = (time.perf_counter() - start) / args.steps if args.steps > 0 else 0.0
    errors, losses = evaluate(model, xa, t, scored)
    print("head=%s rank=%d S=%d step_s=%.6f errors=%s losses=%s"
          % (args.head, args.rank, s, step_s, ",".join(repr(e) for e in errors),
             ",".join(repr(v) for v in losses)), flush=True)


if __name__ == "__main__":
    main()
