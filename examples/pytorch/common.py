"""What train_ddp.py (fed by ddpio.Loader) and compare_dataloader.py (fed by torchvision's
ImageFolder + DataLoader) share: arguments, the model, the DDP training step, exact-once
validation and the report. Only the data feeding differs between the two scripts."""
import argparse
import json
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn

MEAN = torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1) * 255
STD = torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1) * 255


def parse_args(description, data_help):
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--data", required=True, help=data_help + " (training)")
    p.add_argument("--val", required=True, help=data_help + " (validation)")
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--batch-size", type=int, default=32, help="per rank")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--workers", type=int, default=1, help="decoding threads / DataLoader workers per rank")
    p.add_argument("--image-size", type=int, default=64)
    p.add_argument("--seed", type=int, default=0)
    return p


def init(seed):
    """The process group (gloo: CPU tensors). Before any ddpio.Loader: under torchrun --standalone
    the loader joins the job through this group's store."""
    dist.init_process_group("gloo")
    torch.manual_seed(seed)  # the initial weights; torch's DataLoader seeds its workers from it
    torch.set_num_threads(1)  # 4 ranks share this machine's cores
    return dist.get_rank(), dist.get_world_size()


def make_model(classes):
    def block(cin, cout):
        return [nn.Conv2d(cin, cout, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True)]
    model = nn.Sequential(*block(3, 16), *block(16, 32), *block(32, 64), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                          nn.Linear(64, classes))
    return nn.parallel.DistributedDataParallel(model)


def normalise(images):
    """uint8 N,3,H,W (both feeds deliver this) -> float, ImageNet mean/std."""
    return (images.float() - MEAN) / STD


def train_epoch(model, optimizer, batches):
    """One epoch over (images, labels) pairs; returns (images trained on, seconds, seconds the
    loop waited for its next batch)."""
    model.train()
    loss_fn = nn.CrossEntropyLoss()
    images, waited, start = 0, 0.0, time.perf_counter()
    batches = iter(batches)
    while True:
        t = time.perf_counter()
        try:
            x, y = next(batches)
        except StopIteration:
            break
        waited += time.perf_counter() - t
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(model(normalise(x)), y)
        loss.backward()
        optimizer.step()
        images += x.shape[0]
    return images, time.perf_counter() - start, waited


@torch.no_grad()
def evaluate(model, batches, size):
    """Accuracy over the whole validation set of `size` samples from (images, labels, indices)
    batches; checks that the ranks together saw every sample exactly once (no padding counted
    twice, none missed), so the accuracy is exact."""
    model.eval()
    counts = torch.zeros(2, dtype=torch.float64)
    seen = torch.zeros(size, dtype=torch.int32)
    for x, y, index in batches:
        counts[0] += (model(normalise(x)).argmax(1) == y).sum()
        counts[1] += y.shape[0]
        seen.index_add_(0, index, torch.ones_like(index, dtype=torch.int32))
    dist.all_reduce(counts)
    dist.all_reduce(seen)
    if not bool((seen == 1).all()):
        raise RuntimeError(f"validation is not exact-once: {int((seen == 0).sum())} samples never seen, "
                           f"{int((seen > 1).sum())} seen more than once")
    return (counts[0] / counts[1]).item(), int(counts[1].item())


def run(script, args, classes, train_batches, val_batches, val_size, counters=None):
    """The training loop: `train_batches(epoch)` gives (images, labels), `val_batches()`
    (images, labels, dataset indices) of a validation set of `val_size` samples."""
    rank, world = dist.get_rank(), dist.get_world_size()
    model = make_model(classes)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, weight_decay=5e-4)
    images = seconds = waited = 0.0
    for epoch in range(args.epochs):
        n, s, w = train_epoch(model, optimizer, train_batches(epoch))
        images, seconds, waited = images + n, seconds + s, waited + w
        acc, total = evaluate(model, val_batches(), val_size)
        if rank == 0:
            print(f"[{script}] epoch {epoch}: val accuracy {acc:.3f} over {total} images", flush=True)
    print(f"[{script}] rank {rank}: {images / seconds:.1f} training images/s, waited {waited:.2f} s "
          f"of {seconds:.1f} s for data", flush=True)
    rates = torch.tensor([images / seconds], dtype=torch.float64)
    dist.all_reduce(rates)  # the job's training images/s: the ranks' rates summed
    if counters is not None:
        print(f"[{script}] rank {rank} counters: {json.dumps(counters())}", flush=True)
    if rank == 0:
        print(json.dumps({"script": script, "world_size": world, "epochs": args.epochs,
                          "train_images_per_s": round(rates.item(), 1), "val_accuracy": round(acc, 4),
                          "val_images": total, "val_exact_once": True}), flush=True)
    dist.barrier()
    dist.destroy_process_group()


def local_rank():
    return int(os.environ.get("LOCAL_RANK", "0"))
