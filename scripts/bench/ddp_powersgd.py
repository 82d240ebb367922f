#!/usr/bin/env python3
# Reference: PyTorch DDP with its PowerSGD communication hook (torch.distributed.algorithms.ddp_comm_hooks), Caffe's
# LeNet on Fashion-MNIST as configs/fashion-mnist/lenet.yaml trains it in octet (inputs standardized with mean 0.2860,
# std 0.3530; SGD lr 0.01, momentum 0.9; batch 64 per rank; one shard of a shuffled order per rank), on the CPU over
# gloo. Launched by mpirun (rank and size from Open MPI's environment; MASTER_ADDR / MASTER_PORT name rank 0) so that
# the same launcher runs it and octet on one machine or on the test-bed's hosts.
# Usage: ddp_powersgd.py DATA_DIR EPOCHS RANK_OF_P_AND_Q START_STEP [MIN_COMPRESSION_RATE] [SEED]
#        (rank 0: plain fp32 allreduce, DDP's default hook)   prints from rank 0 one JSON line per epoch's test
#        evaluation, as octet's metrics.jsonl writes them ({"event": "eval", "epoch", "test_accuracy", "train_seconds":
#        the training time so far, evaluation excluded}; scripts/time_to_accuracy.py reads them), then one summary line
import json, os, sys, time
import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
from idx_data import load_idx
from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as psgd
from torch.nn.parallel import DistributedDataParallel as DDP


def images(path):
    x = torch.from_numpy(load_idx(path).astype(np.float32) / 255.0).unsqueeze(1)
    return (x - 0.2860) / 0.3530


def main():
    data_dir, epochs, rank_pq, start = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    min_rate = float(sys.argv[5]) if len(sys.argv) > 5 else 2.0
    seed = int(sys.argv[6]) if len(sys.argv) > 6 else 1
    rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", "0"))
    size = int(os.environ.get("OMPI_COMM_WORLD_SIZE", "1"))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=size)
    torch.manual_seed(seed)
    x = images(f"{data_dir}/train-images-idx3-ubyte.gz")
    y = torch.from_numpy(load_idx(f"{data_dir}/train-labels-idx1-ubyte.gz").astype(np.int64))
    tx = images(f"{data_dir}/t10k-images-idx3-ubyte.gz")
    ty = torch.from_numpy(load_idx(f"{data_dir}/t10k-labels-idx1-ubyte.gz").astype(np.int64))
    model = nn.Sequential(
        nn.Conv2d(1, 20, 5), nn.MaxPool2d(2), nn.Conv2d(20, 50, 5), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(800, 500), nn.ReLU(), nn.Linear(500, 10))
    # One bucket for the whole net: with gloo, the hook's chained allreduces of two buckets interleave differently on
    # different ranks (torch 1.13: "op.preamble.length <= op.nbytes"); each tensor is still compressed on its own.
    dist._DEFAULT_FIRST_BUCKET_BYTES = 1 << 30
    ddp = DDP(model, bucket_cap_mb=1024)
    if rank_pq > 0:
        state = psgd.PowerSGDState(process_group=None, matrix_approximation_rank=rank_pq,
                                   start_powerSGD_iter=start, min_compression_rate=min_rate,
                                   use_error_feedback=True, warm_start=True)
        ddp.register_comm_hook(state, psgd.powerSGD_hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    batch = 64
    steps = x.shape[0] // (batch * size)
    seen, train_s, acc = 0, 0.0, None
    for epoch in range(epochs):
        g = torch.Generator()
        g.manual_seed(1000 * seed + epoch)  # one shuffled order for every rank, each takes its own shard of each batch
        perm = torch.randperm(x.shape[0], generator=g)
        dist.barrier()
        t0 = time.perf_counter()
        for s in range(steps):
            idx = perm[(s * size + rank) * batch:(s * size + rank + 1) * batch]
            opt.zero_grad(set_to_none=True)
            loss_fn(ddp(x[idx]), y[idx]).backward()
            opt.step()
            seen += batch * size
        dist.barrier()
        train_s += time.perf_counter() - t0
        if rank == 0:  # outside the timed part; the other ranks wait at the next barrier
            with torch.no_grad():
                acc = (model(tx).argmax(1) == ty).float().mean().item()
            print(json.dumps({"event": "eval", "epoch": epoch + 1, "test_accuracy": acc, "train_seconds": train_s}),
                  flush=True)
    dist.barrier()
    if rank == 0 and acc is None:  # no epoch trained
        with torch.no_grad():
            acc = (model(tx).argmax(1) == ty).float().mean().item()
    if rank == 0:
        print(json.dumps({"framework": "pytorch-ddp", "torch": torch.__version__, "ranks": size,
                          "powersgd_rank": rank_pq, "start_step": start, "epochs": epochs, "seed": seed,
                          "images_per_s": seen / train_s, "train_s": train_s, "test_accuracy": acc}))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
