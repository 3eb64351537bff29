"""torch DDP fed by ddpio.Loader: within each group of --group-size ranks only the leader reads the
dataset; every rank gets exactly its DistributedSampler share, decoded and augmented
(RandomResizedCrop + flip) by the loader's C++ threads, as uint8 tensors viewing its buffers.

    torchrun --standalone --nproc_per_node 4 --redirects 1 --tee 1 \\
        examples/pytorch/train_ddp.py --data train.lmdb --val val.lmdb --group-size 2
"""
import ddpio
import common


def main():
    p = common.parse_args(__doc__, "a dataset made by `ddpio convert`")
    p.add_argument("--group-size", type=int, default=2, help="ranks per group: one reader each")
    args = p.parse_args()
    common.init(args.seed)  # before the loaders: they join the job through torch's store
    train = ddpio.Loader(args.data, batch_size=args.batch_size, image_size=args.image_size, train=True,
                         workers=args.workers, group_size=args.group_size, seed=args.seed)
    # Validation: every sample exactly once over the ranks (padding="none": no duplicates).
    val = ddpio.Loader(args.val, batch_size=args.batch_size, image_size=args.image_size, train=False,
                       workers=args.workers, group_size=args.group_size, padding="none")
    classes = len(ddpio.Dataset(args.data).classes)

    def train_batches(epoch):
        train.set_epoch(epoch)
        return ((b["images"], b["labels"]) for b in train)

    def val_batches():
        return ((b["images"], b["labels"], b["indices"]) for b in val)

    common.run("train_ddp.py (ddpio.Loader)", args, classes, train_batches, val_batches, val.dataset_size,
               counters=train.counters)


if __name__ == "__main__":
    main()
