#!/usr/bin/env python3
"""Did a training run with failures and restarts train every sample exactly once?

Reads the files `ddpio train --indices-out PREFIX` wrote (PREFIX.rank<R>.txt, one per rank that
ever ran; format in ddpio/trainer/index_log.h) and tallies, epoch by epoch, the dataset indices
of the optimizer steps that count: a step line is dropped as *redone* when a later attempt (a
restart: its start lines name it) resumed from an earlier step, i.e. from a checkpoint taken
before that step.
Every sample must appear exactly once per epoch among the steps that count — G times in
replicate mode, where each of a group's G members trains the group's samples (the start lines
say how many: "replicas").

    scripts/tally-indices.py /tmp/run/indices --samples 1500 --epochs 3
    scripts/tally-indices.py /tmp/run/indices --samples 1500 --epochs 3 --json

Prints per epoch: samples trained, missing, repeated; and the starts (world size, resumed step)
and the steps redone. Exit status 0 when every epoch has every sample exactly once, 1 when not
(what is wrong is printed), 2 for a usage error or unreadable files.
"""
import argparse
import collections
import glob
import json
import sys


def parse(paths):
    """Every start and step line; a step line belongs to the attempt of the start line above it
    in its file ("attempt" names it, the same on every rank of it)."""
    starts, steps = [], []
    for path in paths:
        attempt = None
        with open(path, encoding="ascii") as f:
            for number, line in enumerate(f, 1):
                if not line.endswith("\n"):
                    continue  # cut by a kill while it was written: the step is redone anyway
                words = line.split()
                where = f"{path}:{number}"
                try:
                    if words[0] == "start":
                        fields = dict(zip(words[2::2], map(int, words[3::2])))
                        attempt = fields["attempt"]
                        starts.append({"t": int(words[1]), "attempt": attempt, "world": fields["world"],
                                       "rank": fields["rank"], "epoch": fields["epoch"],
                                       "replicas": fields.get("replicas", 1),
                                       "step": fields["step"], "where": where})
                    elif words[0] == "step":
                        n = int(words[6])
                        indices = list(map(int, words[7:]))
                        if words[2] != "epoch" or words[4] != "step" or len(indices) != n:
                            raise ValueError("malformed step line")
                        if attempt is None:
                            raise ValueError("a step line before any start line")
                        steps.append({"t": int(words[1]), "attempt": attempt, "epoch": int(words[3]),
                                      "step": int(words[5]), "indices": indices, "where": where})
                    else:
                        raise ValueError(f"unknown line kind '{words[0]}'")
                except (IndexError, KeyError, ValueError) as e:
                    print(f"tally-indices: {where}: {e}: {line.strip()[:80]}", file=sys.stderr)
                    sys.exit(2)
    return starts, steps


def tally(starts, steps, samples, epochs):
    attempts = {}
    for r in sorted(starts, key=lambda s: s["attempt"]):
        a = attempts.setdefault(r["attempt"], {"attempt": r["attempt"], "step": r["step"], "epoch": r["epoch"],
                                               "world": r["world"], "replicas": r["replicas"], "ranks": []})
        a["ranks"].append(r["rank"])
    for a in attempts.values():
        a["ranks"].sort()
    counted, redone = [], []
    for s in steps:
        # Redone: a later attempt resumed from a checkpoint before this step.
        later = [a for a in attempts.values() if a["attempt"] > s["attempt"] and a["step"] < s["step"]]
        (redone if later else counted).append(s)
    result = {"ok": True, "attempts": list(attempts.values()), "epochs": [],
              "redone_steps": len({(s["attempt"], s["step"]) for s in redone}),
              "redone_step_lines": len(redone)}
    # Replicate mode: every member of a group trains the group's samples (replicas = G).
    replicas = {r["replicas"] for r in starts} or {1}
    if len(replicas) != 1:
        result["ok"] = False
        result["error"] = f"the starts disagree on replicas: {sorted(replicas)}"
    want = max(replicas)
    result["replicas"] = want
    per_epoch = collections.defaultdict(collections.Counter)
    for s in counted:
        per_epoch[s["epoch"]].update(s["indices"])
    for e in range(epochs):
        seen = per_epoch.get(e, collections.Counter())
        missing = [i for i in range(samples) if seen.get(i, 0) < want]
        repeated = {i: c for i, c in seen.items() if c > want}
        outside = [i for i in seen if i < 0 or i >= samples]
        ok = not missing and not repeated and not outside
        result["ok"] = result["ok"] and ok
        result["epochs"].append({"epoch": e, "trained": sum(seen.values()),
                                 "distinct": len(seen),
                                 "missing": sum(want - seen.get(i, 0) for i in missing),
                                 "repeated": sum(c - want for c in repeated.values()),
                                 "missing_first": missing[:10],
                                 "repeated_first": sorted(repeated)[:10],
                                 "outside": outside[:10]})
    extra = sorted(e for e in per_epoch if e >= epochs)
    if extra:
        result["ok"] = False
        result["unexpected_epochs"] = extra
    return result


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="\n\n".join(__doc__.split("\n\n")[1:]))
    p.add_argument("prefix", help="the PREFIX given to ddpio train --indices-out")
    p.add_argument("--samples", type=int, required=True, help="the training set's size")
    p.add_argument("--epochs", type=int, required=True, help="the epochs the run trained")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    a = p.parse_args()
    if a.samples < 1 or a.epochs < 1:
        p.error("--samples and --epochs must be at least 1")
    paths = sorted(glob.glob(glob.escape(a.prefix) + ".rank*.txt"))
    if not paths:
        print(f"tally-indices: no {a.prefix}.rank*.txt files", file=sys.stderr)
        return 2
    try:
        starts, steps = parse(paths)
    except OSError as e:
        print(f"tally-indices: {e}", file=sys.stderr)
        return 2
    r = tally(starts, steps, a.samples, a.epochs)
    r["files"] = len(paths)
    if a.json:
        print(json.dumps(r))
    else:
        for at in r["attempts"]:
            print(f"start: world {at['world']}, from epoch {at['epoch']} step {at['step']} "
                  f"(ranks {','.join(map(str, sorted(at['ranks'])))})")
        for e in r["epochs"]:
            print(f"epoch {e['epoch']}: {e['trained']} trained, {e['distinct']} distinct, "
                  f"{e['missing']} missing {e['missing_first'] or ''}, "
                  f"{e['repeated']} repeated {e['repeated_first'] or ''}")
        print(f"steps redone since a checkpoint: {r['redone_steps']} "
              f"({r['redone_step_lines']} rank-steps)")
        once = "exactly once" if r["replicas"] == 1 else f"exactly {r['replicas']} times (replicas)"
        print(f"every sample of every epoch {once}" if r["ok"] else f"NOT {once}: {r.get('error', '')}")
    return 0 if r["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
