#!/usr/bin/python3
# Reference for octet's image_folder loader: torchvision's ImageNet training pipeline (ImageFolder + RandomResizedCrop
# + RandomHorizontalFlip + ToTensor + Normalize, DataLoader with W worker processes) over N images of a JPEG tree, on
# the CPU; prints one parseable line:
#   torchvision images_per_s=... per_core=... workers=W size=S batch=B images=N seconds=T first_batch_s=F
# images_per_s counts every image from the DataLoader's creation (worker start-up included) to the last batch;
# per_core = images_per_s / max(W, 1) (W = 0: the main process decodes). Images are drawn at random, with the tree
# repeated when N exceeds it. Debian's python3-torchvision (PIL decoding); exit 2 when torchvision cannot be imported.
# Usage: loader_torchvision.py ROOT [--images 2000] [--workers 1] [--batch 64] [--size 224]
#        (ROOT: a folder of class folders, or one holding train/<class>/*; scripts/convert_idx.py --jpeg-tree makes one)
import argparse
import os
import sys
import time


def main():
    ap = argparse.ArgumentParser(prog="loader_torchvision.py", description="torchvision ImageNet-style loader throughput")
    ap.add_argument("root", help="JPEG tree: ROOT/train/<class>/*.JPEG or ROOT/<class>/*.JPEG")
    ap.add_argument("--images", type=int, default=2000, help="images to load (default 2000)")
    ap.add_argument("--workers", type=int, default=1, help="DataLoader worker processes (default 1)")
    ap.add_argument("--batch", "--batch-size", dest="batch", type=int, default=64, help="batch size (default 64)")
    ap.add_argument("--size", type=int, default=224, help="RandomResizedCrop output side (default 224)")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    if a.images < 1 or a.workers < 0 or a.batch < 1 or a.size < 1:
        print("loader_torchvision.py: error: --images, --batch and --size must be >= 1, --workers >= 0", file=sys.stderr)
        sys.exit(2)
    try:
        import torch
        import torchvision
        from torchvision import datasets, transforms
    except Exception as e:  # ImportError, or a torchvision built against another torch
        print(f"loader_torchvision.py: error: cannot import torchvision ({type(e).__name__}: {e}); "
              "install it: apt-get install -y python3-torchvision", file=sys.stderr)
        sys.exit(2)
    root = os.path.join(a.root, "train") if os.path.isdir(os.path.join(a.root, "train")) else a.root
    if not os.path.isdir(root):
        print(f"loader_torchvision.py: error: {a.root}: not a folder", file=sys.stderr)
        sys.exit(2)
    torch.manual_seed(a.seed)
    torch.set_num_threads(1)  # the workers do the work; the main thread only collects batches
    tf = transforms.Compose([
        transforms.RandomResizedCrop(a.size),
        transforms.RandomHorizontalFlip(),
        transforms.ToTensor(),
        transforms.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225]),
    ])
    try:
        ds = datasets.ImageFolder(root, transform=tf)
    except (FileNotFoundError, RuntimeError) as e:
        print(f"loader_torchvision.py: error: {root}: {e}", file=sys.stderr)
        sys.exit(2)
    g = torch.Generator()
    g.manual_seed(a.seed)
    sampler = torch.utils.data.RandomSampler(ds, replacement=False, num_samples=a.images, generator=g)
    t0 = time.perf_counter()
    loader = torch.utils.data.DataLoader(ds, batch_size=a.batch, sampler=sampler, num_workers=a.workers,
                                         drop_last=False, persistent_workers=False)
    n = 0
    first = None
    for x, y in loader:
        if first is None:
            first = time.perf_counter() - t0
        n += x.shape[0]
    secs = time.perf_counter() - t0
    ips = n / secs
    print(f"torchvision images_per_s={ips:.1f} per_core={ips / max(a.workers, 1):.1f} workers={a.workers} "
          f"size={a.size} batch={a.batch} images={n} seconds={secs:.3f} first_batch_s={first:.3f} "
          f"torchvision_version={torchvision.__version__} torch_version={torch.__version__}")


if __name__ == "__main__":
    main()
