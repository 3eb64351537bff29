#!/usr/bin/env python3
"""What a PyTorch user writes first for photos in an object store: a torch `Dataset` whose
__getitem__ does one boto3 GET per sample, decodes the JPEG with PIL and applies torchvision's
RandomResizedCrop + RandomHorizontalFlip, under DataLoader(num_workers, batch_size). The baseline
row of scripts/bench-object-store.sh (docs/PERFORMANCE.md, "Object storage").

  upload  --images DIR --bucket B --prefix P --list FILE
          Puts every JPEG of the ImageFolder DIR as its own object P/<class>/<file> (threads; one
          PUT each) and writes FILE: the keys and class labels in JSON, so an epoch needs no LIST.
  epoch   --bucket B --list FILE [--workers 2] [--batch-size 64] [--image-size 224] [--seed 0]
          One shuffled epoch; prints one JSON line: images, seconds, images_per_s, gets.
  delete  --bucket B
          Deletes every object of B, then B (for a gateway this script did not start).

The store comes from the environment as for the AWS tools: AWS_ENDPOINT_URL (required here: this
boto3 may be older than its own support for it), AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
AWS_REGION; path-style addressing. Each DataLoader worker makes its own client on first use
(a boto3 client must not cross a fork). Exit 0 success, 1 runtime error, 2 usage error.
"""
import argparse
import concurrent.futures
import io
import json
import os
import sys
import time


def client():
    import boto3
    from botocore.config import Config
    endpoint = os.environ.get("AWS_ENDPOINT_URL")
    if not endpoint:
        sys.exit("bench_boto3_loader: AWS_ENDPOINT_URL is not set (scripts/object-store.sh up prints it)")
    return boto3.session.Session().client(
        "s3", endpoint_url=endpoint, region_name=os.environ.get("AWS_REGION", "us-east-1"),
        config=Config(s3={"addressing_style": "path"}, signature_version="s3v4",
                      retries={"max_attempts": 3, "mode": "standard"}))


def upload(args):
    classes = sorted(d for d in os.listdir(args.images) if os.path.isdir(os.path.join(args.images, d)))
    if not classes:
        sys.exit(f"bench_boto3_loader: {args.images} has no class folders (an ImageFolder: DIR/<class>/<image>)")
    items = []
    for label, c in enumerate(classes):
        for name in sorted(os.listdir(os.path.join(args.images, c))):
            if name.lower().endswith((".jpg", ".jpeg")):
                items.append((os.path.join(args.images, c, name), f"{args.prefix}/{c}/{name}", label))
    s3 = client()
    try:
        s3.head_bucket(Bucket=args.bucket)
    except Exception:  # noqa: BLE001 - any failure here means: try to create it
        s3.create_bucket(Bucket=args.bucket)

    def put(item):
        with open(item[0], "rb") as f:
            body = f.read()
        s3.put_object(Bucket=args.bucket, Key=item[1], Body=body)
        return len(body)

    start = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        sent = sum(pool.map(put, items))
    with open(args.list, "w") as f:
        json.dump({"bucket": args.bucket, "classes": classes, "keys": [k for _, k, _ in items],
                   "labels": [label for _, _, label in items]}, f)
    print(json.dumps({"objects": len(items), "bytes": sent, "seconds": time.perf_counter() - start}))


class S3Photos:
    """A map-style torch Dataset: sample i is one GET of keys[i], a PIL decode and the transform."""

    def __init__(self, bucket, keys, labels, transform):
        self.bucket, self.keys, self.labels, self.transform = bucket, keys, labels, transform
        self.s3 = None

    def __len__(self):
        return len(self.keys)

    def __getitem__(self, i):
        from PIL import Image
        if self.s3 is None:  # first use in this worker process
            self.s3 = client()
        body = self.s3.get_object(Bucket=self.bucket, Key=self.keys[i])["Body"].read()
        image = Image.open(io.BytesIO(body)).convert("RGB")
        return self.transform(image), self.labels[i]


def epoch(args):
    import torch
    from torchvision import transforms
    with open(args.list) as f:
        listing = json.load(f)
    transform = transforms.Compose([transforms.RandomResizedCrop(args.image_size),
                                    transforms.RandomHorizontalFlip(), transforms.PILToTensor()])
    dataset = S3Photos(args.bucket, listing["keys"], listing["labels"], transform)
    generator = torch.Generator()
    generator.manual_seed(args.seed)
    loader = torch.utils.data.DataLoader(dataset, batch_size=args.batch_size, shuffle=True,
                                         num_workers=args.workers, generator=generator)
    images, touched = 0, 0
    start = time.perf_counter()
    for x, labels in loader:  # as python -m ddpio.bench's torch epoch: touch every batch
        touched += int(x[:, 0, 0, 0].sum()) + int(labels.sum())
        images += x.shape[0]
    seconds = time.perf_counter() - start
    print(json.dumps({"images": images, "seconds": seconds, "images_per_s": images / seconds,
                      "gets": len(dataset), "workers": args.workers, "batch_size": args.batch_size,
                      "image_size": args.image_size}))


def delete(args):
    s3 = client()
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=args.bucket):
        keys = [{"Key": o["Key"]} for o in page.get("Contents", [])]
        for i in range(0, len(keys), 1000):
            s3.delete_objects(Bucket=args.bucket, Delete={"Objects": keys[i:i + 1000], "Quiet": True})
    s3.delete_bucket(Bucket=args.bucket)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="bench_boto3_loader.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("upload", help="put an ImageFolder's JPEGs, one object each")
    p.add_argument("--images", required=True)
    p.add_argument("--bucket", required=True)
    p.add_argument("--prefix", default="photos")
    p.add_argument("--list", required=True, help="JSON file to write: keys and labels")
    p = sub.add_parser("epoch", help="one DataLoader epoch over the uploaded photos")
    p.add_argument("--bucket", required=True)
    p.add_argument("--list", required=True)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--image-size", type=int, default=224)
    p.add_argument("--seed", type=int, default=0)
    p = sub.add_parser("delete", help="delete a bucket and everything in it")
    p.add_argument("--bucket", required=True)
    args = parser.parse_args(argv)
    try:
        {"upload": upload, "epoch": epoch, "delete": delete}[args.command](args)
    except Exception as e:  # noqa: BLE001 - one clear line, exit 1
        print(f"bench_boto3_loader: {args.command}: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
