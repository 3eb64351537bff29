"""Loader.report(): the straggler report gathered from every rank of a real 2-rank job
(torch.multiprocessing.spawn, init_process_group over tcp:// on loopback). Rank 0 spends 40 ms
outside the loader per batch (a slow model step: its loader keeps ahead of it); rank 1 spends
nothing there and so waits on its loader for every batch: the report must name rank 1, waiting
for its batches, the same on both ranks, with every batch counted as a step. And Loader.census()
in a healthy job names nobody."""
import json
import os
import socket
import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent('''
    import json, os, sys, time
    import torch.distributed as dist
    import torch.multiprocessing as mp
    import ddpio

    def work(rank, world, init, path, out):
        dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world)
        loader = ddpio.Loader(path, batch_size=8, image_size=224, workers=1, seed=3, timeout=60)
        batches = 0
        for epoch in range(2):
            loader.set_epoch(epoch)
            for _ in loader:
                batches += 1
                if rank == 0:
                    time.sleep(0.04)
        report = loader.report()
        census = loader.census()
        dist.barrier()  # the census ran while both ranks lived
        with open(os.path.join(out, f"rank{rank}.json"), "w") as f:
            json.dump({"batches": batches, "report": report, "census": census}, f)
        loader.close()
        dist.destroy_process_group()

    if __name__ == "__main__":
        init, path, out = sys.argv[1:4]
        mp.spawn(work, args=(2, init, path, out), nprocs=2)
''')


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_report_names_the_rank_waiting_for_its_batches_and_census_names_nobody(tmp_path, program):
    # Photos large enough that rank 1's wait for a batch (its loader decoding 8 of them, ~11 ms)
    # stands well clear of rank 0's few ms per step: the report names a rank only when its own
    # time is 25% over the ranks' median. At 320 px a faster loader (4 ms a batch) left rank 1
    # at that line (own 4.1 ms against a median of 3.2 ms: named in some runs, not in others).
    for args in (["synth", "--out", str(tmp_path / "src"), "--classes", "2", "--per-class", "40", "--size", "640"],
                 ["convert", "--src", str(tmp_path / "src"), "--out", str(tmp_path / "db")]):
        subprocess.run([program, *args, "--quiet"], check=True, timeout=300)
    script = tmp_path / "report.py"
    script.write_text(SCRIPT)
    p = subprocess.run([sys.executable, str(script), f"tcp://127.0.0.1:{free_port()}", str(tmp_path / "db"),
                        str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    got = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    for g in got:
        report = g["report"]
        assert [r["rank"] for r in report["ranks"]] == [0, 1]
        assert [r["steps"] for r in report["ranks"]] == [got[0]["batches"], got[1]["batches"]]
        assert report["straggler"] == 1, report["line"]
        assert report["bottleneck"] == "wait", report["line"]
        assert report["line"].startswith("rank 1 (node 1): "), report["line"]  # spawned: a node each
        assert "waiting for its batches" in report["line"], report["line"]
        slow, busy = report["ranks"][1]["stages"], report["ranks"][0]["stages"]
        assert slow["wait"]["share"] > busy["wait"]["share"]
        assert busy["outside"]["share"] > 0.5, busy  # rank 0's 40 ms per batch
        assert set(slow) == {"wait", "outside", "read", "decode", "relay"}
        assert g["census"] == {"vanished": [], "addresses": {}, "store_lost": False, "line": ""}
    assert got[0]["report"]["line"] == got[1]["report"]["line"], "the same report on every rank"
