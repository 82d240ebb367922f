#!/usr/bin/python3
# Writes an IDX dataset (Fashion-MNIST, MNIST: 28x28 grey) in CIFAR-10's binary format, so that the cifar10_bin
# loader trains on real images here, where no CIFAR-10 copy exists: each image padded by 2 pixels to 32x32 and
# repeated into the R, G and B planes; the first 50,000 training images into data_batch_1..5.bin, the first 10,000
# test images into test_batch.bin (10,000 records of 3,073 bytes a file, as CIFAR-10's).
# Usage: scripts/convert_idx.py IDX_DIR OUT_DIR    (IDX_DIR: train-images-idx3-ubyte[.gz] ... t10k-labels-idx1-ubyte[.gz])
#
# --jpeg-tree: the same IDX set as an ImageNet-style JPEG tree for the image_folder loader (PIL):
# OUT_DIR/train/<class>/<index>.JPEG from the training images and OUT_DIR/val/<class>/<index>.JPEG from the test
# images (<index>: the image's place in its IDX file, 5 digits), each RGB (the grey plane in all three channels),
# resized to --size (bicubic; 28 keeps the pixels), JPEG --quality. Class folders sort in label order: class_00 ..
# (--names index) or c0_tshirt .. c9_ankle_boot (--names fashion) or c0_zero .. (--names digits). --flat-val writes
# val/<index>.JPEG flat instead, with OUT_DIR/val_labels.txt ("<file name> <class index>" a line), as ImageNet's
# official validation layout. A non-empty train/ or val/ is refused unless --overwrite (which removes them first).
#   scripts/convert_idx.py --jpeg-tree IDX_DIR OUT_DIR [--size 32] [--quality 90] [--limit-train N] [--limit-test N]
#                          [--names index|fashion|digits] [--flat-val] [--overwrite] [--jobs N]  (N processes, default one
#                          a core)
import argparse
import gzip
import os
import shutil
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


def _write_one(task):
    write_jpeg(*task)


def write_jpegs(tasks, jobs):
    """write_jpeg over (path, gray, size, quality) tasks, on jobs processes."""
    if jobs <= 1:
        for t in tasks:
            write_jpeg(*t)
        return
    import multiprocessing
    with multiprocessing.Pool(jobs) as pool:
        for _ in pool.imap_unordered(_write_one, tasks, chunksize=256):
            pass


CLASS_NAMES = {
    "fashion": ["tshirt", "trouser", "pullover", "dress", "coat", "sandal", "shirt", "sneaker", "bag", "ankle_boot"],
    "digits": ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"],
}


def class_folders(naming, num_classes):
    if naming == "index":
        names = [f"class_{k:02d}" for k in range(num_classes)]
    else:
        words = CLASS_NAMES[naming]
        if num_classes > len(words):
            fail(f"--names {naming} names {len(words)} classes, the labels go up to {num_classes - 1}")
        names = [f"c{k}_{w}" for k, w in enumerate(words[:num_classes])]
    if sorted(names) != names:  # the loader numbers classes by sorted folder name
        fail(f"--names {naming}: folder names do not sort in label order")
    return names


def write_jpeg(path, gray, size, quality):
    from PIL import Image
    im = Image.fromarray(gray, mode="L")
    if size != gray.shape[0]:
        im = im.resize((size, size), Image.BICUBIC)
    tmp = path + f".tmp.{os.getpid()}"
    im.convert("RGB").save(tmp, format="JPEG", quality=quality)
    os.replace(tmp, path)  # whole files only


def jpeg_tree(argv):
    ap = argparse.ArgumentParser(prog="convert_idx.py",
                                 description="Writes an IDX set (MNIST, Fashion-MNIST) as an ImageNet-style JPEG tree.")
    ap.add_argument("--jpeg-tree", action="store_true", required=True, help="write a JPEG tree (this mode)")
    ap.add_argument("idx_dir")
    ap.add_argument("out_dir")
    ap.add_argument("--size", type=int, default=32, help="output side in pixels (default 32; 28 = no resize)")
    ap.add_argument("--quality", type=int, default=90, help="JPEG quality 1-95 (default 90)")
    ap.add_argument("--limit-train", type=int, default=0, help="only the first N training images (0 = all)")
    ap.add_argument("--limit-test", type=int, default=0, help="only the first N test images (0 = all)")
    ap.add_argument("--names", choices=["index", "fashion", "digits"], default="index",
                    help="class folder names: class_00.. (default), c0_tshirt.. or c0_zero..")
    ap.add_argument("--flat-val", action="store_true", help="val/ flat plus OUT_DIR/val_labels.txt")
    ap.add_argument("--overwrite", action="store_true", help="remove an existing train/, val/ and val_labels.txt first")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                    help="processes encoding the JPEGs (default: one a core)")
    a = ap.parse_args(argv)
    if not 1 <= a.size <= 4096:
        fail(f"--size {a.size}: must be in [1, 4096]")
    if not 1 <= a.quality <= 95:
        fail(f"--quality {a.quality}: must be in [1, 95]")
    if a.jobs < 1:
        fail(f"--jobs {a.jobs}: must be >= 1")
    if a.limit_train < 0 or a.limit_test < 0:
        fail("--limit-train and --limit-test must be >= 0")
    tr_x, tr_y = read_idx(a.idx_dir, "train-images-idx3-ubyte"), read_idx(a.idx_dir, "train-labels-idx1-ubyte")
    te_x, te_y = read_idx(a.idx_dir, "t10k-images-idx3-ubyte"), read_idx(a.idx_dir, "t10k-labels-idx1-ubyte")
    for x, y, what in ((tr_x, tr_y, "train"), (te_x, te_y, "t10k")):
        if x.ndim != 3 or x.shape[1] != x.shape[2]:
            fail(f"{a.idx_dir}: {what} images of shape {x.shape[1:]}, expected square grey images")
        if len(x) != len(y):
            fail(f"{a.idx_dir}: {len(x)} {what} images but {len(y)} labels")
    names = class_folders(a.names, int(max(tr_y.max(), te_y.max())) + 1)  # from the whole set: limits keep every folder
    if a.limit_train:
        tr_x, tr_y = tr_x[:a.limit_train], tr_y[:a.limit_train]
    if a.limit_test:
        te_x, te_y = te_x[:a.limit_test], te_y[:a.limit_test]
    train_dir, val_dir = os.path.join(a.out_dir, "train"), os.path.join(a.out_dir, "val")
    labels_file = os.path.join(a.out_dir, "val_labels.txt")
    for d in (train_dir, val_dir):
        if os.path.isdir(d) and os.listdir(d):
            if not a.overwrite:
                fail(f"{d} exists and is not empty (pass --overwrite to replace it)")
            shutil.rmtree(d)
    if a.overwrite and os.path.exists(labels_file):
        os.remove(labels_file)
    for n in names:
        os.makedirs(os.path.join(train_dir, n), exist_ok=True)
        if not a.flat_val:
            os.makedirs(os.path.join(val_dir, n), exist_ok=True)
    os.makedirs(val_dir, exist_ok=True)
    tasks = [(os.path.join(train_dir, names[lab], f"{i:05d}.JPEG"), img, a.size, a.quality)
             for i, (img, lab) in enumerate(zip(tr_x, tr_y))]
    lines = []
    for i, (img, lab) in enumerate(zip(te_x, te_y)):
        fname = f"{i:05d}.JPEG"
        tasks.append((os.path.join(val_dir, fname if a.flat_val else os.path.join(names[lab], fname)), img, a.size,
                      a.quality))
        lines.append(f"{fname} {int(lab)}\n")
    write_jpegs(tasks, a.jobs)
    if a.flat_val:
        tmp = labels_file + f".tmp.{os.getpid()}"
        with open(tmp, "w") as f:
            f.writelines(lines)
        os.replace(tmp, labels_file)
    print(f"{a.out_dir}: train/ ({len(tr_x)} images) and val/ ({len(te_x)}{', flat + val_labels.txt' if a.flat_val else ''}),"
          f" {len(names)} classes ({names[0]} .. {names[-1]}), 3x{a.size}x{a.size} JPEG quality {a.quality}")


def main():
    if any(arg.startswith("-") for arg in sys.argv[1:]):
        if "--jpeg-tree" not in sys.argv[1:] and not {"-h", "--help"} & set(sys.argv[1:]):
            fail("options are for --jpeg-tree only; usage: convert_idx.py IDX_DIR OUT_DIR, or convert_idx.py "
                 "--jpeg-tree IDX_DIR OUT_DIR [options] (--jpeg-tree --help lists them)")
        jpeg_tree(sys.argv[1:])
        return
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
