#!/usr/bin/env python3
# Reference: PyTorch training steps of ResNet-20 (He et al.'s CIFAR net, option-A shortcuts, as configs/cifar10/
# resnet20.yaml) on random 3x32x32 batches on the CPU (Debian's python3-torch): images/s over the steps after warm-up.
# PRECISION fp32 (default) or bf16: bf16 runs the forward pass and the loss under CPU autocast (torch.autocast with
# dtype bfloat16: convolutions and linear in bf16, fp32 weights and optimizer), the backward pass and the optimizer
# step outside it, as AMP users write it.
# Usage: resnet20_torch.py THREADS [BATCH] [STEPS] [PRECISION]   (prints one JSON line)
import contextlib, json, resource, sys, time
import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.c1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.b1 = nn.BatchNorm2d(cout)
        self.c2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.b2 = nn.BatchNorm2d(cout)
        self.stride, self.pad = stride, (cout - cin) // 2

    def forward(self, x):
        y = self.b2(self.c2(F.relu(self.b1(self.c1(x)))))
        s = x[:, :, ::self.stride, ::self.stride] if self.stride > 1 else x
        if self.pad:
            s = F.pad(s, (0, 0, 0, 0, self.pad, self.pad))
        return F.relu(y + s)


def resnet20():
    layers = [nn.Conv2d(3, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU()]
    cin = 16
    for cout, stride in ((16, 1), (32, 2), (64, 2)):
        for b in range(3):
            layers.append(Block(cin, cout, stride if b == 0 else 1))
            cin = cout
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10)]
    return nn.Sequential(*layers)


def main():
    threads = int(sys.argv[1])
    batch = int(sys.argv[2]) if len(sys.argv) > 2 else 128
    steps = int(sys.argv[3]) if len(sys.argv) > 3 else 20
    precision = sys.argv[4] if len(sys.argv) > 4 else "fp32"
    if precision not in ("fp32", "bf16"):
        sys.exit(f"resnet20_torch.py: PRECISION is fp32 or bf16, not {precision!r}")
    torch.set_num_threads(threads)
    torch.manual_seed(1)
    model = resnet20()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    x = torch.randn(batch, 3, 32, 32)
    y = torch.randint(0, 10, (batch,))
    warm = 3

    def autocast():
        if precision == "bf16":
            return torch.autocast(device_type="cpu", dtype=torch.bfloat16)
        return contextlib.nullcontext()

    for i in range(warm + steps):
        if i == warm:
            t0 = time.perf_counter()
        opt.zero_grad()
        with autocast():
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
    secs = time.perf_counter() - t0
    print(json.dumps({"images_per_s": steps * batch / secs, "threads": threads, "batch": batch,
                      "precision": precision,
                      "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))


if __name__ == "__main__":
    main()
