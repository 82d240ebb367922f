# IDX files (MNIST, Fashion-MNIST; gzip) as numpy arrays, for the PyTorch reference scripts beside this file.
import gzip, struct
import numpy as np


def load_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    magic, = struct.unpack(">I", data[:4])
    ndim = magic & 0xFF
    dims = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)
