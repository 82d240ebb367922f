#!/usr/bin/python3
# Weights in and out against PyTorch, on the reference nets (LeNet, ResNet-20, Caffe's AlexNet, ResNet-18 and ResNet-50
# in torchvision's layout): random weights and batchnorm statistics written by torch as safetensors (a small writer
# here: Debian has no Python safetensors) load into octet (octet eval --weights), and octet's eval-mode logits on the
# inputs it saw (--logits) agree with torch's on the same inputs to 1e-4 relative; the other way, weights octet trained
# and exported (octet export, torchvision names for the ResNets) load into the torch model with
# load_state_dict(strict=True) and give octet's logits; a run's own test accuracy comes back exactly from its exported
# weights; and (ResNet-20) weights loaded onto the simulated device give the CPU's logits bit for bit. This also holds the configs to their references layer for layer: strides, padding, ceil-mode
# pooling, LRN's constants, option A's shortcut, batchnorm's eps.
# Usage: /usr/bin/python3 tests/weights_parity_test.py OCTET SOURCE_DIR   (Debian's Python, where apt puts torch; exit 77 without)
import json
import os
import struct
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    import yaml
except ImportError as e:
    print(f"SKIPPED: {e} (Debian: apt-get install python3-torch python3-numpy python3-yaml)")
    sys.exit(77)

octet, root = sys.argv[1], sys.argv[2]
torch.manual_seed(0)
torch.set_num_threads(2)
work = tempfile.mkdtemp(prefix="octet-parity-")
bad = []


def write_safetensors(path, tensors):
    header, data = {}, b""
    for name in sorted(tensors):
        a = tensors[name].detach().cpu().numpy() if torch.is_tensor(tensors[name]) else tensors[name]
        dtype = {np.dtype("float32"): "F32", np.dtype("int64"): "I64"}[a.dtype]
        raw = np.ascontiguousarray(a).astype(a.dtype.newbyteorder("<")).tobytes()
        header[name] = {"dtype": dtype, "shape": list(a.shape), "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data)


def read_safetensors(path):
    with open(path, "rb") as f:
        b = f.read()
    n = struct.unpack("<Q", b[:8])[0]
    header = json.loads(b[8:8 + n])
    out = {}
    for name, v in header.items():
        if name == "__metadata__":
            continue
        lo, hi = v["data_offsets"]
        dt = {"F32": "<f4", "I64": "<i8"}[v["dtype"]]
        out[name] = torch.from_numpy(np.frombuffer(b[8 + n + lo:8 + n + hi], dtype=dt).reshape(v["shape"]).copy())
    return out


def run(*args):
    p = subprocess.run([octet, *args], capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"octet {' '.join(args)} failed ({p.returncode}):\n{p.stdout}\n{p.stderr}")
    return p.stdout


# --- torch twins of the configs' nets, with octet's (or torchvision's) tensor names ---
class LeNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1, self.conv2 = nn.Conv2d(1, 20, 5), nn.Conv2d(20, 50, 5)
        self.fc1, self.fc2 = nn.Linear(800, 500), nn.Linear(500, 10)

    def forward(self, x):
        x = F.max_pool2d(self.conv1(x), 2)
        x = F.max_pool2d(self.conv2(x), 2)
        return self.fc2(F.relu(self.fc1(x.flatten(1))))


class ResNet20(nn.Module):  # He et al.'s CIFAR net, option A shortcuts, octet's names
    def __init__(self):
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(3, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16)
        self.blocks = []
        cin = 16
        for s, c in ((1, 16), (2, 32), (3, 64)):
            for b in (1, 2, 3):
                stride = 2 if s > 1 and b == 1 else 1
                p = f"s{s}b{b}_"
                setattr(self, p + "conv1", nn.Conv2d(cin, c, 3, stride, 1, bias=False))
                setattr(self, p + "bn1", nn.BatchNorm2d(c))
                setattr(self, p + "conv2", nn.Conv2d(c, c, 3, 1, 1, bias=False))
                setattr(self, p + "bn2", nn.BatchNorm2d(c))
                self.blocks.append((p, stride, cin, c))
                cin = c
        self.fc = nn.Linear(64, 10)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        for p, stride, cin, c in self.blocks:
            y = F.relu(getattr(self, p + "bn1")(getattr(self, p + "conv1")(x)))
            y = getattr(self, p + "bn2")(getattr(self, p + "conv2")(y))
            skip = x
            if stride > 1 or cin != c:  # option A: subsample, zero channels on both sides
                skip = F.pad(x[:, :, ::stride, ::stride], (0, 0, 0, 0, (c - cin) // 2, c - cin - (c - cin) // 2))
            x = F.relu(y + skip)
        return self.fc(x.mean((2, 3)))


class CaffeAlexNet(nn.Module):
    def __init__(self, fc6_in):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 96, 11, 4)
        self.conv2 = nn.Conv2d(96, 256, 5, 1, 2, groups=2)
        self.conv3 = nn.Conv2d(256, 384, 3, 1, 1)
        self.conv4 = nn.Conv2d(384, 384, 3, 1, 1, groups=2)
        self.conv5 = nn.Conv2d(384, 256, 3, 1, 1, groups=2)
        self.fc6, self.fc7, self.fc8 = nn.Linear(fc6_in, 4096), nn.Linear(4096, 4096), nn.Linear(4096, 1000)
        self.lrn = nn.LocalResponseNorm(5, alpha=1e-4, beta=0.75, k=1.0)

    def forward(self, x):
        pool = lambda t: F.max_pool2d(t, 3, 2, ceil_mode=True)
        x = pool(self.lrn(F.relu(self.conv1(x))))
        x = pool(self.lrn(F.relu(self.conv2(x))))
        x = F.relu(self.conv4(F.relu(self.conv3(x))))
        x = pool(F.relu(self.conv5(x)))
        x = F.relu(self.fc7(F.relu(self.fc6(x.flatten(1)))))
        return self.fc8(x)


class Block(nn.Module):  # torchvision's BasicBlock (expansion 1) and Bottleneck (expansion 4, stride on the 3x3)
    def __init__(self, cin, width, stride, bottleneck):
        super().__init__()
        out = width * (4 if bottleneck else 1)
        self.bottleneck = bottleneck
        if bottleneck:
            self.conv1, self.bn1 = nn.Conv2d(cin, width, 1, bias=False), nn.BatchNorm2d(width)
            self.conv2, self.bn2 = nn.Conv2d(width, width, 3, stride, 1, bias=False), nn.BatchNorm2d(width)
            self.conv3, self.bn3 = nn.Conv2d(width, out, 1, bias=False), nn.BatchNorm2d(out)
        else:
            self.conv1, self.bn1 = nn.Conv2d(cin, width, 3, stride, 1, bias=False), nn.BatchNorm2d(width)
            self.conv2, self.bn2 = nn.Conv2d(width, width, 3, 1, 1, bias=False), nn.BatchNorm2d(width)
        self.downsample = None
        if stride != 1 or cin != out:
            self.downsample = nn.Sequential(nn.Conv2d(cin, out, 1, stride, bias=False), nn.BatchNorm2d(out))

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        if self.bottleneck:
            y = self.bn3(self.conv3(F.relu(y)))
        return F.relu(y + (self.downsample(x) if self.downsample is not None else x))


class TorchvisionResNet(nn.Module):
    def __init__(self, layers, bottleneck):
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64)
        cin = 64
        for i, (n, width) in enumerate(zip(layers, (64, 128, 256, 512))):
            blocks = []
            for b in range(n):
                blocks.append(Block(cin, width, 2 if i > 0 and b == 0 else 1, bottleneck))
                cin = width * (4 if bottleneck else 1)
            setattr(self, f"layer{i + 1}", nn.Sequential(*blocks))
        self.fc = nn.Linear(cin, 1000)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 3, 2, 1)
        for i in range(1, 5):
            x = getattr(self, f"layer{i}")(x)
        return self.fc(x.mean((2, 3)))


def randomize(model):  # batchnorm's affine parameters and running statistics away from their initial values
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.weight.uniform_(0.5, 1.5)
                m.bias.normal_(0, 0.1)
                m.running_mean.normal_(0, 0.1)
                m.running_var.uniform_(0.5, 1.5)
                m.num_batches_tracked.fill_(7)
    return model.eval()


def config_for(name, config, shape, classes, out_dir):
    """The reference config's net on seeded synthetic data of the given shape (its own data section replaced)."""
    with open(os.path.join(root, config)) as f:
        c = yaml.safe_load(f)
    c["model"]["input"] = list(shape)
    c["data"] = {"dataset": "synthetic", "synthetic_shape": list(shape), "synthetic_classes": classes,
                 "synthetic_train": 8, "synthetic_test": 40, "batch_size": 4, "eval_batch_size": 16}
    c["run"] = {"name": name, "seed": 3, "epochs": 1, "max_steps": 2, "out_dir": out_dir, "log_every": 1,
                "threads": 2}
    c.pop("compression", None)
    c.pop("parallel", None)
    path = os.path.join(work, name + ".yaml")
    with open(path, "w") as f:
        yaml.safe_dump(c, f)
    return path


def compare(what, ours, theirs):
    scale = max(float(theirs.abs().max()), 1e-6)
    err = float((ours - theirs).abs().max()) / scale
    ok = err <= 1e-4
    print(f"{'ok' if ok else 'FAIL'}: {what}: max |octet - torch| / max |torch| = {err:.2e} over {tuple(ours.shape)}")
    if not ok:
        bad.append(what)


nets = [  # name, config, torch model (a factory), input shape, classes, images, torchvision names
    ("lenet", "configs/fashion-mnist/lenet.yaml", LeNet, (1, 28, 28), 10, 4, False),
    ("resnet20", "configs/cifar10/resnet20.yaml", ResNet20, (3, 32, 32), 10, 4, False),
    ("alexnet", "configs/imagenet/alexnet.yaml", lambda: CaffeAlexNet(256 * 2 * 2), (3, 71, 71), 1000, 2, False),
    ("resnet18", "configs/imagenet/resnet18.yaml", lambda: TorchvisionResNet((2, 2, 2, 2), False), (3, 64, 64), 1000,
     2, True),
    ("resnet50", "configs/imagenet/resnet50.yaml", lambda: TorchvisionResNet((3, 4, 6, 3), True), (3, 64, 64), 1000,
     1, True),
]
for name, config, make, shape, classes, count, tv in nets:
    model = randomize(make())
    cfg = config_for(name, config, shape, classes, os.path.join(work, "runs"))
    # torch -> octet: the weights by init_from's loader, the logits on the inputs octet saw.
    w = os.path.join(work, name + ".safetensors")
    write_safetensors(w, model.state_dict())
    logits = os.path.join(work, name + ".logits.safetensors")
    run("eval", cfg, "--weights", w, "--logits", logits, "--keep", str(count), "--out", os.path.join(work, "e.json"))
    got = read_safetensors(logits)
    with torch.no_grad():
        compare(f"{name}: torch's weights in octet", got["logits"], model(got["inputs"]))
    if name == "resnet20":  # the weights into device tensors: the simulated device's logits are the CPU's bits
        sim = os.path.join(work, name + ".sim.safetensors")
        run("eval", cfg, "--weights", w, "--logits", sim, "--keep", str(count), "--set", "parallel.device=sim",
            "--out", os.path.join(work, "e.json"))
        same = torch.equal(read_safetensors(sim)["logits"], got["logits"])
        print(f"{'ok' if same else 'FAIL'}: {name}: the simulated device's logits are the CPU's, bit for bit")
        if not same:
            bad.append(name + " sim")
    # octet -> torch: two training steps, exported (torchvision's names for the ResNets), strict load.
    run("train", cfg)
    run_dir = os.path.join(work, "runs", name)
    exported = os.path.join(work, name + ".exported.safetensors")
    run("export", run_dir, "--out", exported, "--names", "torchvision" if tv else "octet")
    fresh = randomize(make())
    fresh.load_state_dict(read_safetensors(exported), strict=True)
    logits = os.path.join(work, name + ".trained.safetensors")
    eval_json = os.path.join(work, name + ".eval.json")
    run("eval", cfg, "--weights", run_dir, "--logits", logits, "--keep", str(count), "--out", eval_json)
    got = read_safetensors(logits)
    with torch.no_grad():
        compare(f"{name}: octet's trained weights in torch (strict load)", got["logits"], fresh(got["inputs"]))
    # The run's own test accuracy (as a count of images) and loss, from the run directory and its exported weights
    # (summary.json holds 6 significant digits).
    with open(os.path.join(run_dir, "summary.json")) as f:
        summary = json.load(f)
    again = os.path.join(work, name + ".again.json")
    run("eval", cfg, "--weights", exported, "--out", again)
    for f in (eval_json, again):
        with open(f) as h:
            e = json.load(h)
        right, expected = round(e["top1"] * e["count"]), round(summary["test_accuracy"] * e["count"])
        if right != expected or abs(e["loss"] - summary["test_loss"]) > 1e-5 * abs(summary["test_loss"]):
            print(f"FAIL: {name}: {f}: {right} right, loss {e['loss']}; the run: {expected}, {summary['test_loss']}")
            bad.append(name + " accuracy")
    print(f"ok: {name}: the run's {expected} of {e['count']} test images right and its loss {summary['test_loss']}, "
          "from its directory and from its exported weights")

if bad:
    print(f"weights_parity_test: {len(bad)} failed: {', '.join(bad)}")
    sys.exit(1)
print(f"weights_parity_test: {len(nets)} nets agree with torch both ways")
