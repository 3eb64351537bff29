"""A training script written the way PyTorch users write one, fed by ddpio.Loader instead of
torch's DataLoader — nothing else changes:

  * started by torchrun, process group first, then the loaders (they join through its store);
  * `loader.set_epoch(epoch)` before each epoch, as with DistributedSampler;
  * every batch's `indices` and `labels` kept in lists for the whole run (a record of what was
    trained on — ddpio copies these small arrays, so keeping them costs no batch memory);
  * a `finally:` that saves a checkpoint (model, optimizer, loader position) whatever happens,
    and a restart that resumes from it mid-epoch;
  * validation with `padding="mask"`: padded duplicates are flagged and left out of the metric.

At the end every rank checks, with all-reduces, that the job trained on every sample of every
epoch exactly once (across an interruption too) and validated on every sample exactly once, and
rank 0 prints one JSON line.

    torchrun --standalone --nproc_per_node 2 --redirects 1 --tee 1 examples/pytorch/train_plain.py \\
        --data train.lmdb --val val.lmdb --out run/        # add --interrupt-at 5 to stop mid-run
"""
import argparse
import json
import os

import torch
import torch.distributed as dist
import torch.nn as nn

import ddpio


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", required=True, help="training dataset (ddpio convert)")
    p.add_argument("--val", required=True, help="validation dataset")
    p.add_argument("--out", required=True, help="folder for the checkpoint and each rank's record")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--group-size", type=int, default=2, help="ranks per group: only the leader reads")
    p.add_argument("--interrupt-at", type=int, default=-1,
                   help="raise KeyboardInterrupt at this global step (to show the finally and the resume)")
    return p.parse_args()


def model_for(classes):
    return nn.Sequential(nn.Conv2d(3, 16, 3, stride=2, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                         nn.Flatten(), nn.Linear(16, classes))


def main():
    args = parse_args()
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    os.makedirs(args.out, exist_ok=True)
    checkpoint = os.path.join(args.out, "checkpoint.pt")

    train = ddpio.Loader(args.data, batch_size=args.batch_size, shuffle=True, num_workers=1, pin_memory=True,
                         image_size=32, group_size=args.group_size)
    val = ddpio.Loader(args.val, batch_size=args.batch_size, shuffle=False, num_workers=1, train=False,
                       image_size=32, padding="mask", group_size=args.group_size)
    model = nn.parallel.DistributedDataParallel(model_for(len(train.dataset.classes)))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    first_epoch, step = 0, 0
    if os.path.exists(checkpoint):  # a restart: continue exactly where the last run stopped
        state = torch.load(checkpoint)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        train.load_state_dict(state["loader"])
        first_epoch, step = state["loader"]["epoch"], state["step"]

    seen_indices, seen_labels, seen_epochs = [], [], []
    position = train.state_dict()  # after the last completed step: what a checkpoint resumes from
    try:
        for epoch in range(first_epoch, args.epochs):
            if epoch != first_epoch:
                train.set_epoch(epoch)
            model.train()
            for batch in train:
                if step == args.interrupt_at:
                    raise KeyboardInterrupt(f"interrupted at step {step}")
                seen_indices.append(batch["indices"])
                seen_labels.append(batch["labels"])
                seen_epochs.append(epoch)
                optimizer.zero_grad()
                loss = nn.functional.cross_entropy(model(batch["images"].float() / 255), batch["labels"])
                loss.backward()
                optimizer.step()
                step += 1
                position = train.state_dict()
    finally:
        # Saved on every way out — the end, an error, Ctrl-C. The loader's position is taken after
        # each completed step (state_dict() counts the batches handed out, and a batch handed out
        # when the error came was not trained on); it holds for all ranks together.
        if rank == 0:
            torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                        "loader": position, "step": step}, checkpoint + ".tmp")
            os.replace(checkpoint + ".tmp", checkpoint)
        record = {"indices": [t.tolist() for t in seen_indices], "labels": [t.tolist() for t in seen_labels],
                  "epochs": seen_epochs}
        with open(os.path.join(args.out, f"rank{rank}-from{first_epoch}-{step}.json"), "w") as f:
            json.dump(record, f)

    # Validation: padded duplicates come flagged valid=False and stay out of the metric.
    model.eval()
    correct = torch.zeros(2, dtype=torch.float64)
    seen = torch.zeros(val.dataset_size, dtype=torch.int32)
    with torch.no_grad():
        for batch in val:
            keep = batch["valid"]
            predicted = model(batch["images"][keep].float() / 255).argmax(1)
            correct += torch.tensor([(predicted == batch["labels"][keep]).sum().item(), keep.sum().item()])
            seen.index_add_(0, batch["indices"][keep], torch.ones(int(keep.sum()), dtype=torch.int32))
    dist.all_reduce(correct)
    dist.all_reduce(seen)
    if not bool((seen == 1).all()):
        raise RuntimeError("validation is not exact-once")
    if rank == 0:
        print(json.dumps({"world_size": world, "steps": step, "resumed_from_epoch": first_epoch,
                          "val_accuracy": round((correct[0] / correct[1]).item(), 4),
                          "val_images": int(correct[1].item()), "val_exact_once": True}), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
