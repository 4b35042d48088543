"""Throughput variant (b): a reference written the way the MNIST PonderNet article does it.

The article ("Understanding DeepMind's PonderNet", PyTorch Lightning on MNIST; its code is the
public PonderNet_MNIST repository) uses:
    CNN  conv 1->10 (k5) -> max-pool -> relu -> conv 10->20 (k5) -> Dropout2d -> max-pool -> relu
         -> flatten (20*4*4 = 320) -> linear to a 64-d embedding -> relu
    cell an MLP: [embedding, h] (64 + 64) -> 64 -> relu -> dropout 0.2 -> 64 -> relu = h_{n+1}
    the CNN embedding recomputed at every step (the image is re-encoded N + 1 times per forward)
    a standard DataLoader over torchvision's MNIST with per-image PIL -> ToTensor -> Normalize
    Adam lr 1e-3, gradient clipping 0.5, batch 128, N = 20, lambda_p = 0.2, beta = 0.01
This file is written from that description (no code copied) and runs in a plain loop, so the
reference is *not* charged for PyTorch Lightning's own per-step overhead.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class ReferenceConfig:
    channels1: int = 10       # first conv layer (kernel 5, no padding)
    channels2: int = 20       # second conv layer (kernel 5, no padding), then Dropout2d
    embed: int = 64           # CNN output size
    hidden: int = 64          # MLP cell: hidden layer and state size
    conv_dropout: float = 0.5 # Dropout2d after the second conv (torch's default p)
    mlp_dropout: float = 0.2  # dropout inside the MLP cell
    max_steps: int = 20       # N
    lambda_p: float = 0.2
    beta: float = 0.01
    lr: float = 1e-3
    grad_clip: float = 0.5
    batch_size: int = 128
    num_workers: int = 0      # the article's DataLoader uses the default: loading in the main process


class ArticleCNN(nn.Module):
    def __init__(self, cfg: ReferenceConfig):
        super().__init__()
        self.conv1 = nn.Conv2d(1, cfg.channels1, 5)
        self.conv2 = nn.Conv2d(cfg.channels1, cfg.channels2, 5)
        self.drop = nn.Dropout2d(cfg.conv_dropout)
        self.fc = nn.Linear(cfg.channels2 * 4 * 4, cfg.embed)

    def forward(self, x):                                              # x [B, 1, 28, 28]
        z = F.relu(F.max_pool2d(self.conv1(x), 2))                     # [B, 10, 12, 12]
        z = F.relu(F.max_pool2d(self.drop(self.conv2(z)), 2))          # [B, 20, 4, 4]
        return F.relu(self.fc(z.flatten(1)))                           # [B, 64]


class ArticleMLPCell(nn.Module):
    def __init__(self, cfg: ReferenceConfig):
        super().__init__()
        self.i2h = nn.Linear(cfg.embed + cfg.hidden, cfg.hidden)
        self.h2o = nn.Linear(cfg.hidden, cfg.hidden)
        self.drop = nn.Dropout(cfg.mlp_dropout)

    def forward(self, z):                                              # z [B, E + H]
        return F.relu(self.h2o(self.drop(F.relu(self.i2h(z)))))        # [B, H]


class ArticlePonderNet(nn.Module):
    """y [N, B, 10], p [N, B]: the article's forward, the CNN re-run at every step."""

    def __init__(self, cfg: ReferenceConfig):
        super().__init__()
        self.cfg = cfg
        self.cnn = ArticleCNN(cfg)
        self.cell = ArticleMLPCell(cfg)
        self.out_head = nn.Linear(cfg.hidden, 10)
        self.lambda_head = nn.Linear(cfg.hidden, 1)

    def forward(self, x):
        B, N = x.shape[0], self.cfg.max_steps
        h = x.new_zeros(B, self.cfg.hidden)                                        # [B, H]
        h = self.cell(torch.cat([self.cnn(x), h], 1))                              # h_1
        not_halted = x.new_ones(B)                                                 # prod_{j<n} (1 - lambda_j)
        halt_step = torch.zeros(B, dtype=torch.long, device=x.device)
        ys, ps = [], []
        for n in range(1, N + 1):
            lam = x.new_ones(B) if n == N else torch.sigmoid(self.lambda_head(h)).squeeze(1)   # [B]
            ys.append(self.out_head(h))                                            # [B, 10]
            ps.append(not_halted * lam)                                            # p_n [B]
            drawn = torch.bernoulli(lam).long() * n * (halt_step == 0)             # the article draws halts in training too
            halt_step = torch.maximum(drawn, halt_step)
            not_halted = not_halted * (1 - lam)
            h = self.cell(torch.cat([self.cnn(x), h], 1))                          # embedding recomputed
        return torch.stack(ys), torch.stack(ps), halt_step                         # [N, B, 10], [N, B], [B]


def article_loss(y, p, target, cfg: ReferenceConfig):
    """The article's loss: sum_n p_n CE(y_n) + beta * KLDivLoss(log p, p_G) (its KL direction)."""
    N, B = p.shape
    ce = F.cross_entropy(y.flatten(0, 1), target.repeat(N), reduction="none").view(N, B)    # [N, B]
    rec = (p * ce).sum(0).mean()
    n = torch.arange(N, dtype=torch.float32, device=p.device)
    prior = cfg.lambda_p * (1 - cfg.lambda_p) ** n                                           # [N], not renormalised
    reg = F.kl_div(p.t().clamp_min(1e-30).log(), prior.expand(B, N), reduction="batchmean")
    return rec + cfg.beta * reg


def article_loader(data_dir: str, cfg: ReferenceConfig, seed: int = 0):
    """torchvision MNIST (55k of the 60k, as the article splits) through a DataLoader with PIL transforms."""
    from torch.utils.data import DataLoader, random_split
    from torchvision import transforms
    from torchvision.datasets import MNIST

    from ponder.data import MNIST_MEAN, MNIST_STD, _prepare_raw
    from pathlib import Path

    tv_root = _prepare_raw(Path(data_dir).expanduser())       # the .gz files decompressed where torchvision looks
    tf = transforms.Compose([transforms.ToTensor(), transforms.Normalize((MNIST_MEAN,), (MNIST_STD,))])
    full = MNIST(str(tv_root), train=True, download=False, transform=tf)
    train, _ = random_split(full, [55000, len(full) - 55000], generator=torch.Generator().manual_seed(seed))
    return DataLoader(train, batch_size=cfg.batch_size, shuffle=True, num_workers=cfg.num_workers,
                      generator=torch.Generator().manual_seed(seed))


def reference_train_step(model: ArticlePonderNet, opt, x, y, cfg: ReferenceConfig) -> float:
    y_steps, p, _ = model(x)
    loss = article_loss(y_steps, p, y, cfg)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
    opt.step()
    return loss.item()


def build_reference(cfg: Optional[ReferenceConfig] = None, seed: int = 0):
    cfg = cfg or ReferenceConfig()
    torch.manual_seed(seed)
    model = ArticlePonderNet(cfg).train()
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    return model, opt, cfg
