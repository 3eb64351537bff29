"""python3 -m ddpio.bench: ddpio.Loader from Python next to the C++ loader alone and next to
torchvision's ImageFolder + DataLoader, in one run on the same images.

Each round runs the three one after the other (interleaved, so drifts of a shared machine hit all
three; python and c++ swap places every round, so neither always follows the torch epoch):
  python  one epoch of ddpio.Loader(train=True, RandomResizedCrop + flip, uint8), the loop
          touching every batch (a sum over one byte per image and over the labels);
  c++     `ddpio bench loader --epochs 1` with the same settings (the loader alone, no Python;
          its one measured epoch follows a warm-up epoch, as the python loader's do here),
          which also measures the JPEG full-decode ceiling the way its epoch runs: as many
          decoders at once as the loader has workers, interleaved with its epochs (bench
          loader's ceiling_images_per_s; its one-thread figure times the workers overstates
          what two busy threads reach on a shared machine);
  torch   one epoch of torchvision ImageFolder + DataLoader(num_workers) over the original JPEG
          folder, RandomResizedCrop + RandomHorizontalFlip + PILToTensor (uint8, as ddpio's), in a
          process of its own (as the c++ one), so its leftovers do not slow the python epochs.
It prints the median images/s of each over the rounds (min-max beside it), the ratios
python/c++, python/torch and python/ceiling — each the median of the rounds' own ratios (paired:
the two ran back to back) and, beside it, the ratio of the medians — and the share of the python
epoch its loop spent waiting for batches (near 100%: the loop is not the bound, the decoding is).
One epoch is a few seconds: on a busy machine single rounds vary by 10% or more, so use 5+
rounds before reading a few percent into a ratio. Without --data it makes a dataset of
photo-like JPEGs first (`ddpio synth` + `ddpio convert`, in a temporary directory).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from ddpio.__main__ import find_program


def log(message):
    sys.stderr.write(f"[ddpio.bench] {message}\n")
    sys.stderr.flush()


def run_program(program, *args):
    result = subprocess.run([program, *args], capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(f"ddpio {' '.join(args)} failed ({result.returncode}):\n{result.stderr}")
    return result.stdout


def make_dataset(program, work, per_class, size):
    images, db = os.path.join(work, "images"), os.path.join(work, "train.lmdb")
    log(f"making 10 x {per_class} photo-like JPEGs of ~{size} px in {images}")
    run_program(program, "synth", "--out", images, "--classes", "10", "--per-class", str(per_class),
                "--size", str(size), "--quiet")
    log(f"converting them to {db}")
    run_program(program, "convert", "--src", images, "--out", db, "--quiet")
    return db, images


def python_epoch(loader, epoch):
    """images/s of one epoch, and the share of it the loop spent waiting for the next batch."""
    loader.set_epoch(epoch)
    images, touched = 0, 0
    waited = loader.counters()["loader_wait_s"]
    start = time.perf_counter()
    for batch in loader:
        x = batch["images"]
        touched += int(x[:, 0, 0, 0].sum()) + int(batch["labels"].sum())  # a real touch of each batch
        images += x.shape[0]
    seconds = time.perf_counter() - start
    return images / seconds, (loader.counters()["loader_wait_s"] - waited) / seconds


def cpp_epoch(program, args):
    out = run_program(program, "bench", "loader", "--data", args.data, "--workers", str(args.workers),
                      "--batch-size", str(args.batch_size), "--image-size", str(args.image_size),
                      "--epochs", "1", "--json")
    report = json.loads(out.strip().splitlines()[-1])
    return report["images_per_s"], report.get("ceiling_images_per_s")


def torch_epoch(args, epoch):
    """One torchvision epoch in a process of its own, as the C++ one: whatever torch's DataLoader
    leaves behind in its process (forked workers being torn down, its heap) stays out of the
    ddpio.Loader's epochs (measured: the first ddpio epoch after an in-process torch epoch ran
    ~20% slower)."""
    out = subprocess.run([sys.executable, "-m", "ddpio.bench", "--torch-epoch", str(epoch), "--images", args.images,
                          "--workers", str(args.workers), "--batch-size", str(args.batch_size),
                          "--image-size", str(args.image_size)], capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"the torchvision epoch failed ({out.returncode}):\n{out.stderr}")
    return float(out.stdout.strip().splitlines()[-1])


def torch_epoch_here(args, epoch):
    import torch
    import torchvision
    from torchvision import transforms
    transform = transforms.Compose([transforms.RandomResizedCrop(args.image_size),
                                    transforms.RandomHorizontalFlip(), transforms.PILToTensor()])
    dataset = torchvision.datasets.ImageFolder(args.images, transform=transform)
    generator = torch.Generator()
    generator.manual_seed(epoch)
    loader = torch.utils.data.DataLoader(dataset, batch_size=args.batch_size, shuffle=True,
                                         num_workers=args.workers, generator=generator)
    images, touched = 0, 0
    start = time.perf_counter()
    for x, labels in loader:
        touched += int(x[:, 0, 0, 0].sum()) + int(labels.sum())
        images += x.shape[0]
    return images / (time.perf_counter() - start)


def summary(values):
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "rounds": values}


def ratio(report, key, numerators, denominators):
    """python / other: the median of the rounds' paired ratios, and the ratio of the medians."""
    rounds = [n / d for n, d in zip(numerators, denominators)]
    report[key] = statistics.median(rounds)
    report[key + "_rounds"] = rounds
    report[key + "_of_medians"] = statistics.median(numerators) / statistics.median(denominators)
    return f"{report[key]:.3f}   (ratio of medians {report[key + '_of_medians']:.3f}; rounds " + \
        ", ".join(f"{r:.2f}" for r in rounds) + ")"


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python3 -m ddpio.bench", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", help="a converted dataset (default: make one)")
    parser.add_argument("--images", help="the ImageFolder --data was converted from (for the torch run)")
    parser.add_argument("--workers", type=int, default=2, help="decoding threads / DataLoader workers (2)")
    parser.add_argument("--batch-size", type=int, default=64, help="samples per batch (64)")
    parser.add_argument("--image-size", type=int, default=224, help="output side (224)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of the three, interleaved (3)")
    parser.add_argument("--per-class", type=int, default=200,
                        help="images per class (10 classes) of the dataset made without --data (200)")
    parser.add_argument("--size", type=int, default=448, help="their nominal side in pixels (448)")
    parser.add_argument("--no-torch", action="store_true", help="skip the torchvision DataLoader")
    parser.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    parser.add_argument("--torch-epoch", type=int, help=argparse.SUPPRESS)  # internal: one torch epoch, print images/s
    args = parser.parse_args(argv)
    if args.torch_epoch is not None:
        print(torch_epoch_here(args, args.torch_epoch))
        return
    if args.workers < 1 or args.batch_size < 1 or args.image_size < 1 or args.rounds < 1:
        parser.error("--workers, --batch-size, --image-size and --rounds must be at least 1")
    if (args.data is None) != (args.images is None) and not (args.data and args.no_torch):
        parser.error("give --data and --images together (the torch run reads the JPEG folder), or neither")
    program = find_program()
    if program is None:
        parser.error("the ddpio program was not found (set DDPIO_PROGRAM)")

    with tempfile.TemporaryDirectory(prefix="ddpio-bench-") as work:
        if args.data is None:
            args.data, args.images = make_dataset(program, work, args.per_class, args.size)
        import ddpio
        loader = ddpio.Loader(args.data, batch_size=args.batch_size, image_size=args.image_size, train=True,
                              workers=args.workers)
        python_rates, waits, cpp_rates, ceilings, torch_rates = [], [], [], [], []
        python_epoch(loader, 10_000)  # warm: the page cache, the slots
        for r in range(args.rounds):
            steps = ["python", "c++"] if r % 2 == 0 else ["c++", "python"]
            for step in steps:
                if step == "python":
                    rate, wait = python_epoch(loader, r)
                    python_rates.append(rate)
                    waits.append(wait)
                else:
                    rate, ceiling = cpp_epoch(program, args)
                    cpp_rates.append(rate)
                    if ceiling:
                        ceilings.append(ceiling)
            line = (f"round {r + 1}/{args.rounds}: python {python_rates[-1]:.0f} (waiting {waits[-1]:.0%}), "
                    f"c++ {cpp_rates[-1]:.0f}")
            if not args.no_torch:
                torch_rates.append(torch_epoch(args, r))
                line += f", torch {torch_rates[-1]:.0f}"
            log(line + f" images/s; python / c++ {python_rates[-1] / cpp_rates[-1]:.2f}")
        images = loader.dataset_size
        copied = loader.counters()["batches_copied"]
        loader.close()

    report = {"data": args.data, "workers": args.workers, "batch_size": args.batch_size,
              "image_size": args.image_size, "images": images,
              "python": summary(python_rates), "python_waiting": summary(waits), "cpp": summary(cpp_rates),
              "python_batches_copied": copied}
    if ceilings:
        report["ceiling"] = summary(ceilings)
    if torch_rates:
        report["torch"] = summary(torch_rates)
    print(f"{args.rounds} rounds, {images} images, {args.workers} workers, batch {args.batch_size}, "
          f"{args.image_size} px, RandomResizedCrop + flip, uint8; images/s: median (min-max)")
    rows = [("ddpio.Loader, Python loop", report["python"]), ("ddpio bench loader (C++)", report["cpp"])]
    if torch_rates:
        rows.append(("torchvision ImageFolder + DataLoader", report["torch"]))
    if ceilings:
        rows.append(("ceiling: full JPEG decode, workers at once", report["ceiling"]))
    for name, s in rows:
        print(f"  {name:<46} {s['median']:8.0f}   ({s['min']:.0f}-{s['max']:.0f})")
    print(f"  python / c++     = {ratio(report, 'python_vs_cpp', python_rates, cpp_rates)}")
    if torch_rates:
        print(f"  python / torch   = {ratio(report, 'python_vs_torch', python_rates, torch_rates)}")
    if ceilings and len(ceilings) == len(python_rates):
        print(f"  python / ceiling = {ratio(report, 'python_vs_ceiling', python_rates, ceilings)}")
    print(f"  batches the Python loop got as copies: {copied} (0: every batch zero-copy)")
    print(f"  the Python loop waited for batches {report['python_waiting']['median']:.0%} of its epoch "
          f"(median; {report['python_waiting']['min']:.0%}-{report['python_waiting']['max']:.0%})")
    if args.json:
        print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
