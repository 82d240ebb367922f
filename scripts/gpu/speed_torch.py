#!/usr/bin/env python3
# PyTorch's side of scripts/gpu/speed.sh: training steps of one reproduction net on one GPU, torch only (no
# torchvision: the GPU machine may lack it), on a synthetic batch made once on the GPU, and one JSON line with the
# steady images/s and the peak memory. The nets mirror octet's configs layer for layer: torchvision's ResNet-50 and
# ResNet-18 (configs/imagenet/resnet{50,18}.yaml: Bottleneck with the stride on the 3x3 conv, "V1.5", and BasicBlock;
# 1000 classes), Caffe's AlexNet (configs/imagenet/alexnet.yaml: grouped conv2/4/5, LRN, ceil-mode pooling, dropout)
# and Caffe's LeNet (configs/mnist/lenet.yaml: no ReLU after the convolutions). A step: zero_grad, forward,
# cross-entropy, backward, SGD (momentum 0.9, the config's weight decay).
# Modes (as octet's model.precision): fp32 (TF32 off for matmuls and cuDNN), tf32 (both on), bf16 (autocast bfloat16,
# model and input channels_last), fp16 (autocast float16 + a GradScaler, channels_last). cudnn.benchmark is on in every
# mode (cuDNN picks its fastest algorithms during the warm-up steps, as octet picks its own before the timed steps).
# Usage: speed_torch.py MODEL MODE BATCH STEPS WARMUP      MODEL: resnet50 | resnet18 | alexnet | lenet
#   prints {"model":..., "mode":..., "batch":..., "images_per_s":..., "peak_mem_mib":..., "params":...}
#   --device cpu: the same steps on the CPU (scripts/bench/imagenet_cpu_speed.sh; bf16 is CPU autocast bfloat16,
#   channels_last)
import argparse
import contextlib
import json
import sys
import time

import torch
import torch.nn as nn

# Parameter counts of the nets as their references define them: torchvision's resnet50 / resnet18, Caffe's
# bvlc_alexnet (octet's alexnet.yaml header), Caffe's LeNet (conv 20, conv 50, fc 500, fc 10 on 1x28x28).
EXPECTED_PARAMS = {"resnet50": 25_557_032, "resnet18": 11_689_512, "alexnet": 60_965_224, "lenet": 431_080}
INPUT = {"resnet50": (3, 224, 224), "resnet18": (3, 224, 224), "alexnet": (3, 227, 227), "lenet": (1, 28, 28)}
CLASSES = {"resnet50": 1000, "resnet18": 1000, "alexnet": 1000, "lenet": 10}
WEIGHT_DECAY = {"resnet50": 1e-4, "resnet18": 1e-4, "alexnet": 5e-4, "lenet": 0.0}  # the configs' optimizer sections


def conv3x3(cin, cout, stride=1):
    return nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)


def conv1x1(cin, cout, stride=1):
    return nn.Conv2d(cin, cout, 1, stride=stride, bias=False)


class BasicBlock(nn.Module):  # torchvision.models.resnet.BasicBlock
    expansion = 1

    def __init__(self, cin, width, stride=1, downsample=None):
        super().__init__()
        self.conv1 = conv3x3(cin, width, stride)
        self.bn1 = nn.BatchNorm2d(width)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = conv3x3(width, width)
        self.bn2 = nn.BatchNorm2d(width)
        self.downsample = downsample

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + identity)


class Bottleneck(nn.Module):  # torchvision.models.resnet.Bottleneck (V1.5: the stride on conv2, the 3x3)
    expansion = 4

    def __init__(self, cin, width, stride=1, downsample=None):
        super().__init__()
        self.conv1 = conv1x1(cin, width)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = conv3x3(width, width, stride)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = conv1x1(width, width * self.expansion)
        self.bn3 = nn.BatchNorm2d(width * self.expansion)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return self.relu(out + identity)


class ResNet(nn.Module):  # torchvision.models.resnet.ResNet (groups 1, width 64, no dilation, zero_init_residual off)
    def __init__(self, block, layers, num_classes=1000):
        super().__init__()
        self.inplanes = 64
        self.conv1 = nn.Conv2d(3, 64, kernel_size=7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        self.layer1 = self._make_layer(block, 64, layers[0])
        self.layer2 = self._make_layer(block, 128, layers[1], stride=2)
        self.layer3 = self._make_layer(block, 256, layers[2], stride=2)
        self.layer4 = self._make_layer(block, 512, layers[3], stride=2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(512 * block.expansion, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.constant_(m.weight, 1)
                nn.init.constant_(m.bias, 0)

    def _make_layer(self, block, width, blocks, stride=1):
        downsample = None
        if stride != 1 or self.inplanes != width * block.expansion:
            downsample = nn.Sequential(conv1x1(self.inplanes, width * block.expansion, stride),
                                       nn.BatchNorm2d(width * block.expansion))
        layers = [block(self.inplanes, width, stride, downsample)]
        self.inplanes = width * block.expansion
        layers += [block(self.inplanes, width) for _ in range(1, blocks)]
        return nn.Sequential(*layers)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def caffe_alexnet(num_classes=1000):
    # configs/imagenet/alexnet.yaml: conv1 96 k11 s4; LRN(5, 1e-4, 0.75, k 1: Caffe's across-channel LRN is torch's);
    # ceil-mode max pooling 3/2; conv2 256 k5 p2 groups 2; conv3 384 k3 p1; conv4 384 k3 p1 groups 2; conv5 256 k3 p1
    # groups 2; fc6 4096, fc7 4096 (each ReLU + dropout 0.5); fc8. 227 -> 55 -> 27 -> 13 -> 6.
    return nn.Sequential(
        nn.Conv2d(3, 96, 11, stride=4), nn.ReLU(inplace=True),
        nn.LocalResponseNorm(5, alpha=1e-4, beta=0.75, k=1.0), nn.MaxPool2d(3, 2, ceil_mode=True),
        nn.Conv2d(96, 256, 5, padding=2, groups=2), nn.ReLU(inplace=True),
        nn.LocalResponseNorm(5, alpha=1e-4, beta=0.75, k=1.0), nn.MaxPool2d(3, 2, ceil_mode=True),
        nn.Conv2d(256, 384, 3, padding=1), nn.ReLU(inplace=True),
        nn.Conv2d(384, 384, 3, padding=1, groups=2), nn.ReLU(inplace=True),
        nn.Conv2d(384, 256, 3, padding=1, groups=2), nn.ReLU(inplace=True),
        nn.MaxPool2d(3, 2, ceil_mode=True),
        nn.Flatten(),
        nn.Linear(256 * 6 * 6, 4096), nn.ReLU(inplace=True), nn.Dropout(0.5),
        nn.Linear(4096, 4096), nn.ReLU(inplace=True), nn.Dropout(0.5),
        nn.Linear(4096, num_classes))


def caffe_lenet(num_classes=10):
    # configs/mnist/lenet.yaml: conv 20 k5, maxpool 2, conv 50 k5, maxpool 2, fc 500, ReLU, fc 10 (no ReLU after the
    # convolutions, as Caffe's). 28 -> 24 -> 12 -> 8 -> 4.
    return nn.Sequential(
        nn.Conv2d(1, 20, 5), nn.MaxPool2d(2),
        nn.Conv2d(20, 50, 5), nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(50 * 4 * 4, 500), nn.ReLU(inplace=True),
        nn.Linear(500, num_classes))


def build(name):
    if name == "resnet50":
        return ResNet(Bottleneck, [3, 4, 6, 3])
    if name == "resnet18":
        return ResNet(BasicBlock, [2, 2, 2, 2])
    if name == "alexnet":
        return caffe_alexnet()
    if name == "lenet":
        return caffe_lenet()
    raise SystemExit(f"speed_torch.py: unknown model '{name}' (known: {', '.join(EXPECTED_PARAMS)})")


def grad_scaler(device):
    try:  # torch >= 2.3
        return torch.amp.GradScaler(device)
    except (AttributeError, TypeError):
        return torch.cuda.amp.GradScaler(enabled=device == "cuda")


def main():
    ap = argparse.ArgumentParser(description="PyTorch training-step speed of one reproduction net (speed.sh)")
    ap.add_argument("model", choices=sorted(EXPECTED_PARAMS))
    ap.add_argument("mode", choices=["fp32", "tf32", "bf16", "fp16"])
    ap.add_argument("batch", type=int)
    ap.add_argument("steps", type=int)
    ap.add_argument("warmup", type=int)
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"], help="where to train (default cuda)")
    ap.add_argument("--profile", action="store_true",
                    help="bracket the timed steps with the CUDA profiler API (torch.cuda.profiler.start/stop), as "
                         "octet's run.profile does, for nsys --capture-range=cudaProfilerApi or ncu "
                         "--profile-from-start off (profile.sh)")
    a = ap.parse_args()
    dev = a.device
    if a.batch < 1 or a.steps < 1 or a.warmup < 0:
        raise SystemExit("speed_torch.py: BATCH and STEPS must be >= 1, WARMUP >= 0")
    if dev == "cuda" and not torch.cuda.is_available():
        raise SystemExit("speed_torch.py: torch " + torch.__version__ + " sees no CUDA GPU")

    # cudnn.benchmark on in every mode: cuDNN times its algorithms for each shape during the warm-up steps.
    torch.backends.cudnn.benchmark = True
    tf32 = a.mode == "tf32"  # fp32: true fp32; bf16/fp16: autocast's half types, what stays fp32 is true fp32
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    half = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(a.mode)
    fmt = torch.channels_last if half is not None else torch.contiguous_format

    torch.manual_seed(1)
    model = build(a.model)
    params = sum(p.numel() for p in model.parameters())
    if params != EXPECTED_PARAMS[a.model]:
        print(f"speed_torch.py: {a.model} has {params:,} parameters, expected {EXPECTED_PARAMS[a.model]:,}",
              file=sys.stderr)
        sys.exit(3)
    if dev == "cpu":
        print(f"{a.model}: {params:,} parameters (as expected)", file=sys.stderr)
    model = model.to(dev, memory_format=fmt).train()
    x = torch.randn(a.batch, *INPUT[a.model], device=dev).contiguous(memory_format=fmt)
    y = torch.randint(0, CLASSES[a.model], (a.batch,), device=dev, dtype=torch.int64)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=WEIGHT_DECAY[a.model])
    loss_fn = nn.CrossEntropyLoss()
    scaler = grad_scaler(dev) if a.mode == "fp16" else None

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast(dev, dtype=half) if half is not None else contextlib.nullcontext():
            loss = loss_fn(model(x), y)
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            opt.step()
        return loss

    sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
    for _ in range(a.warmup):
        step()
    sync()
    profiling = a.profile and dev == "cuda"
    if profiling:
        torch.cuda.profiler.start()
    t0 = time.perf_counter()
    for _ in range(a.steps):
        loss = step()
    sync()
    seconds = time.perf_counter() - t0
    if profiling:
        torch.cuda.profiler.stop()
    if not torch.isfinite(loss.detach().float()).item():
        print(f"speed_torch.py: the loss is {loss.item()} after the timed steps", file=sys.stderr)
    peak = torch.cuda.max_memory_allocated() / 2**20 if dev == "cuda" else None  # tensors, not the cache's reserve
    print(json.dumps({"model": a.model, "mode": a.mode, "batch": a.batch,
                      "images_per_s": round(a.batch * a.steps / seconds, 1) if seconds > 0 else None,
                      "peak_mem_mib": round(peak) if peak is not None else None, "params": params}), flush=True)


if __name__ == "__main__":
    main()
