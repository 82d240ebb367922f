#!/usr/bin/env python3
# Reference: PyTorch training of Caffe's LeNet on (Fashion-)MNIST IDX files, one epoch, images/s, on the CPU (Debian's
# python3-torch) or a GPU (batches copied from pinned host memory each step, as octet does).
# Usage: lenet_torch.py DATA_DIR THREADS [BATCH] [cpu|cuda]   (prints one JSON line)
import json, resource, sys, time
import numpy as np
import torch
import torch.nn as nn
from idx_data import load_idx


def main():
    data_dir, threads = sys.argv[1], int(sys.argv[2])
    batch = int(sys.argv[3]) if len(sys.argv) > 3 else 64
    device = sys.argv[4] if len(sys.argv) > 4 else "cpu"
    torch.set_num_threads(threads)
    torch.manual_seed(1)
    x = torch.from_numpy(load_idx(f"{data_dir}/train-images-idx3-ubyte.gz").astype(np.float32) / 255.0).unsqueeze(1)
    y = torch.from_numpy(load_idx(f"{data_dir}/train-labels-idx1-ubyte.gz").astype(np.int64))
    model = nn.Sequential(
        nn.Conv2d(1, 20, 5), nn.MaxPool2d(2), nn.Conv2d(20, 50, 5), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(800, 500), nn.ReLU(), nn.Linear(500, 10)).to(device)
    if device == "cuda":
        x, y = x.pin_memory(), y.pin_memory()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    perm = torch.randperm(x.shape[0])
    n = (x.shape[0] // batch) * batch
    t0 = time.perf_counter()
    for i in range(0, n, batch):
        idx = perm[i:i + batch]
        xb, yb = x[idx], y[idx]
        if device == "cuda":
            xb, yb = xb.pin_memory().to(device, non_blocking=True), yb.pin_memory().to(device, non_blocking=True)
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(xb), yb)
        loss.backward()
        opt.step()
    if device == "cuda":
        torch.cuda.synchronize()
    dt = time.perf_counter() - t0
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    print(json.dumps({"framework": "pytorch", "device": device, "threads": threads, "batch": batch, "images": n,
                      "seconds": round(dt, 3), "images_per_s": round(n / dt, 1),
                      "final_loss": round(loss.item(), 4), "peak_rss_mb": round(rss_mb, 1)}))

if __name__ == "__main__":
    main()
