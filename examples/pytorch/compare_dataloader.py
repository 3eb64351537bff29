"""The same DDP training as train_ddp.py, fed the usual way: torchvision ImageFolder + torch's
DataLoader (worker processes decoding with PIL) + DistributedSampler, the same augmentation
(RandomResizedCrop + flip; validation Resize + CenterCrop) and the same uint8 tensors.

    torchrun --standalone --nproc_per_node 4 --redirects 1 --tee 1 \\
        examples/pytorch/compare_dataloader.py --data images/ --val val-images/
"""
import torch
import torch.distributed as dist
import torchvision
from torchvision import transforms

import common


class Indexed(torch.utils.data.Dataset):
    """The samples `indices` of `dataset` as (image, label, index)."""

    def __init__(self, dataset, indices):
        self.dataset, self.indices = dataset, list(indices)

    def __len__(self):
        return len(self.indices)

    def __getitem__(self, k):
        i = self.indices[k]
        return (*self.dataset[i], i)


def main():
    args = common.parse_args(__doc__, "an ImageFolder of JPEGs").parse_args()
    rank, world = common.init(args.seed)
    size = args.image_size
    train_set = torchvision.datasets.ImageFolder(args.data, transforms.Compose([
        transforms.RandomResizedCrop(size), transforms.RandomHorizontalFlip(), transforms.PILToTensor()]))
    val_set = torchvision.datasets.ImageFolder(args.val, transforms.Compose([
        transforms.Resize(size * 256 // 224), transforms.CenterCrop(size), transforms.PILToTensor()]))
    sampler = torch.utils.data.DistributedSampler(train_set, seed=args.seed)
    train = torch.utils.data.DataLoader(train_set, batch_size=args.batch_size, sampler=sampler,
                                        num_workers=args.workers, persistent_workers=args.workers > 0)
    # Validation: every sample exactly once over the ranks (rank r takes r, r + world, ...;
    # DistributedSampler would pad with duplicates), with its index for the exact-once check.
    val = torch.utils.data.DataLoader(Indexed(val_set, range(rank, len(val_set), world)),
                                      batch_size=args.batch_size, num_workers=args.workers)

    def train_batches(epoch):
        sampler.set_epoch(epoch)
        return iter(train)

    common.run("compare_dataloader.py (torchvision DataLoader)", args, len(train_set.classes), train_batches,
               lambda: iter(val), len(val_set))


if __name__ == "__main__":
    main()
