#!/usr/bin/python3
# Writes an IDX dataset (Fashion-MNIST, MNIST: 28x28 grey) in CIFAR-10's binary format, so that the cifar10_bin
# loader trains on real images here, where no CIFAR-10 copy exists: each image padded by 2 pixels to 32x32 and
# repeated into the R, G and B planes; the first 50,000 training images into data_batch_1..5.bin, the first 10,000
# test images into test_batch.bin (10,000 records of 3,073 bytes a file, as CIFAR-10's).
# Usage: scripts/convert_idx.py IDX_DIR OUT_DIR    (IDX_DIR: train-images-idx3-ubyte[.gz] ... t10k-labels-idx1-ubyte[.gz])
import gzip
import os
import struct
import sys

import numpy as np


def fail(msg):
    print(f"convert_idx.py: error: {msg}", file=sys.stderr)
    sys.exit(1)


def read_idx(d, stem):
    for name in (stem + ".gz", stem):
        p = os.path.join(d, name)
        if os.path.isfile(p):
            data = (gzip.open if name.endswith(".gz") else open)(p, "rb").read()
            magic, = struct.unpack(">I", data[:4])
            ndim = magic & 0xFF
            if magic >> 8 != 0x08 or ndim not in (1, 3):
                fail(f"{p}: bad magic 0x{magic:x} at offset 0")
            dims = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
            want = 4 + 4 * ndim + int(np.prod(dims))
            if len(data) != want:
                fail(f"{p}: {len(data)} bytes, header promises {want}")
            return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)
    fail(f"{d}: neither {stem}.gz nor {stem} exists")


def write_batches(out, names, images, labels):
    per = 10000
    if len(images) < per * len(names):
        fail(f"{len(images)} images for {len(names)} batches of {per}")
    padded = np.zeros((len(images), 32, 32), dtype=np.uint8)
    padded[:, 2:30, 2:30] = images
    for k, name in enumerate(names):
        sl = slice(k * per, (k + 1) * per)
        rec = np.empty((per, 3073), dtype=np.uint8)
        rec[:, 0] = labels[sl]
        planes = padded[sl].reshape(per, 1024)
        rec[:, 1:1025] = planes
        rec[:, 1025:2049] = planes
        rec[:, 2049:3073] = planes
        path = os.path.join(out, name)
        tmp = path + f".tmp.{os.getpid()}"
        with open(tmp, "wb") as f:
            f.write(rec.tobytes())
        os.replace(tmp, path)  # whole files only


def main():
    if len(sys.argv) != 3:
        fail("usage: convert_idx.py IDX_DIR OUT_DIR")
    src, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    tr_x, tr_y = read_idx(src, "train-images-idx3-ubyte"), read_idx(src, "train-labels-idx1-ubyte")
    te_x, te_y = read_idx(src, "t10k-images-idx3-ubyte"), read_idx(src, "t10k-labels-idx1-ubyte")
    if tr_x.shape[1:] != (28, 28):
        fail(f"{src}: images of {tr_x.shape[1:]}, expected 28x28")
    write_batches(out, [f"data_batch_{i}.bin" for i in range(1, 6)], tr_x, tr_y)
    write_batches(out, ["test_batch.bin"], te_x, te_y)
    print(f"{out}: data_batch_1..5.bin (50000 images) and test_batch.bin (10000), 3x32x32")


if __name__ == "__main__":
    main()
