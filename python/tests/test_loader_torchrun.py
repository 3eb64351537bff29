"""ddpio.Loader under torchrun: 4 ranks in groups of 2 on loopback, joining through torchrun's
agent store (with and without torch.distributed's process group on the same store), or under
--standalone through the store of torch.distributed's process group. Each rank
gets exactly torch's DistributedSampler share, only the groups' leaders read the dataset, and the
pixels are the ones a single process makes for the same samples."""
import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap

import pytest
import torch.utils.data

import ddpio

WORLD, GROUP, BATCH, SEED, EPOCH, STOP_AFTER = 4, 2, 4, 3, 1, 2

SCRIPT = textwrap.dedent('''
    import hashlib, json, logging, os, sys
    logging.basicConfig(level=logging.INFO)  # ddpio's INFO lines (where it joined) on stderr
    import ddpio
    import torch
    import torch.distributed as dist

    path, out, init_process_group = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
    if init_process_group:
        dist.init_process_group("gloo")  # torchrun's agent store, before ddpio joins the job
    record = {"rank": int(os.environ["RANK"])}
    # Created in the same order on every rank; the second reuses the job the first joined.
    for name, extra in (("encoded", {}), ("decoded", {"mode": "shard", "payload": "decoded"})):
        loader = ddpio.Loader(path, batch_size=BATCH, group_size=GROUP, image_size=32, seed=SEED, **extra)
        loader.set_epoch(EPOCH)
        indices, labels, digests = [], [], []
        for batch in loader:
            indices += batch["indices"].tolist()
            labels += batch["labels"].tolist()
            digests += [hashlib.sha1(image.permute(1, 2, 0).contiguous().numpy().tobytes()).hexdigest()
                        for image in batch["images"]]
        record[name] = {"indices": indices, "labels": labels, "digests": digests, "batches": len(loader),
                        "counters": loader.counters(), "rank": loader.rank, "world_size": loader.world_size,
                        "is_leader": loader.is_leader}
        loader.close()
    # Stopped after STOP_AFTER batches: the state to resume from on another world size.
    loader = ddpio.Loader(path, batch_size=BATCH, group_size=GROUP, image_size=32, seed=SEED)
    loader.set_epoch(EPOCH)
    batches = iter(loader)
    taken = [next(batches)["indices"].tolist() for _ in range(STOP_AFTER)]
    record["stopped"] = {"taken": taken, "state": loader.state_dict()}
    del batches
    loader.close()
    if init_process_group:
        total = torch.tensor([record["rank"] + 1])
        dist.all_reduce(total)  # the process group still works beside the loaders
        record["all_reduce"] = int(total.item())
        dist.destroy_process_group()
    with open(os.path.join(out, f"rank{record['rank']}.json"), "w") as f:
        json.dump(record, f)
''')


def free_loopback_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_torchrun(script, args, standalone=False, timeout=120):
    # torchrun itself (torch.distributed.run, /usr/bin/torchrun's entry point) with the agent's
    # static rendezvous (its agent store), or --standalone (c10d rendezvous: no agent store; the
    # loader joins through torch.distributed's store). Debian 12's torchrun 1.13 on Python 3.11
    # crashes on the default --redirects/--tee "0" (its Std flag lookup finds no zero member),
    # hence "1".
    rendezvous = (["--standalone"] if standalone else
                  ["--nnodes", "1", "--master_addr", "127.0.0.1", "--master_port", str(free_loopback_port())])
    command = [sys.executable, "-m", "torch.distributed.run", *rendezvous, "--nproc_per_node", str(WORLD),
               "--redirects", "1", "--tee", "1", str(script), *map(str, args)]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # torchrun and the ranks it started
        out, err = proc.communicate()
        pytest.fail(f"torchrun did not finish in {timeout} s:\n{out}\n{err}")
    assert proc.returncode == 0, f"torchrun exited {proc.returncode}:\n{out}\n{err}"
    return out, err


def single_process_digests(path):
    """sha1 of each sample's pixels as one process makes them (seeded by seed, epoch and index only)."""
    loader = ddpio.Loader(path, batch_size=8, image_size=32, seed=SEED)
    loader.set_epoch(EPOCH)
    digests = {}
    for batch in loader:
        for i, image in zip(batch["indices"].tolist(), batch["images"]):
            digests[i] = hashlib.sha1(image.permute(1, 2, 0).contiguous().numpy().tobytes()).hexdigest()
    return digests


@pytest.mark.parametrize("init_process_group, standalone", [(False, False), (True, False), (True, True)],
                         ids=["ddpio_alone", "with_torch_process_group", "standalone_through_torchs_store"])
def test_four_ranks_in_groups_of_two_get_torchs_shares_read_by_the_leaders(dataset_96px, tmp_path,
                                                                          init_process_group, standalone):
    script = tmp_path / "train.py"
    script.write_text(f"BATCH, GROUP, SEED, EPOCH, STOP_AFTER = {BATCH}, {GROUP}, {SEED}, {EPOCH}, {STOP_AFTER}\n"
                      + SCRIPT)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    out, err = run_torchrun(script, [dataset_96px, out_dir, int(init_process_group)], standalone=standalone)
    # Joined through a PyTorch store (torch.distributed's, or else the agent's), not one of its own.
    store = "store torch.distributed's store" if init_process_group else "store torchrun agent tcp://"
    assert store in err, err

    ds = ddpio.Dataset(dataset_96px)
    n = len(ds)
    assert n % WORLD != 0  # the sampler pads
    labels = [ds[i][1] for i in range(n)]
    pixels = single_process_digests(dataset_96px)
    assert sorted(pixels) == list(range(n)) and len(set(pixels.values())) == n  # every sample, all different
    records = {}
    for r in range(WORLD):
        path = out_dir / f"rank{r}.json"
        assert path.exists(), f"rank {r} wrote nothing:\n{out}\n{err}"
        records[r] = json.loads(path.read_text())

    for name in ("encoded", "decoded"):
        got = {r: records[r][name] for r in range(WORLD)}
        for r, g in got.items():
            where = f"{name} loader, rank {r}"
            sampler = torch.utils.data.DistributedSampler(range(n), num_replicas=WORLD, rank=r, shuffle=True,
                                                          seed=SEED)
            sampler.set_epoch(EPOCH)
            assert g["indices"] == list(sampler), where
            assert g["rank"] == r and g["world_size"] == WORLD, where
            assert g["batches"] == -(-len(sampler) // BATCH), where
            assert g["labels"] == [labels[i] for i in g["indices"]], where
            assert g["digests"] == [pixels[i] for i in g["indices"]], f"{where}: pixels differ from one process's"
            assert g["is_leader"] == (r % GROUP == 0), where  # contiguous layout: groups {0, 1} and {2, 3}
        for leader in range(0, WORLD, GROUP):
            peer = leader + 1
            lc, pc = got[leader]["counters"], got[peer]["counters"]
            where = f"{name} loader, group of ranks {leader} and {peer}"
            # Only the leader reads: its own share and its peer's, each record once.
            assert lc["records_read"] == len(got[leader]["indices"]) + len(got[peer]["indices"]), (where, lc)
            assert lc["bytes_read"] > 0, (where, lc)
            assert pc["records_read"] == 0 and pc["bytes_read"] == 0, (where, pc)
            assert pc["bytes_received"] > 0 and pc["bytes_received"] == lc["bytes_sent"], (where, lc, pc)
            assert pc["images"] == len(got[peer]["indices"]), (where, pc)
            # Who decodes: each rank its own share (encoded), or the leader the group's (decoded).
            own = records[leader]["encoded"]["counters"]["decode_threads"]
            if name == "encoded":
                assert own > 0 and pc["decode_threads"] == own, (where, lc, pc)
            else:
                assert lc["decode_threads"] == GROUP * own and pc["decode_threads"] == 0, (where, lc, pc)
    if init_process_group:
        assert [records[r]["all_reduce"] for r in range(WORLD)] == [sum(range(1, WORLD + 1))] * WORLD

    # Elastic resume: the state the 4 ranks saved after STOP_AFTER steps, loaded by one process.
    consumed = BATCH * STOP_AFTER * WORLD
    states = [records[r]["stopped"]["state"] for r in range(WORLD)]
    assert states == [states[0]] * WORLD  # leaders and peers (which identify the dataset without reading it)
    assert {key: states[0][key] for key in ("epoch", "position", "dataset_size", "seed")} == \
        {"epoch": EPOCH, "position": consumed, "dataset_size": n, "seed": SEED}
    order = torch.utils.data.DistributedSampler(range(n), num_replicas=1, rank=0, shuffle=True, seed=SEED)
    order.set_epoch(EPOCH)
    order = list(order)  # the epoch's permutation, which the 4 ranks took in strided steps
    taken = [i for r in range(WORLD) for batch in records[r]["stopped"]["taken"] for i in batch]
    assert sorted(taken) == sorted(order[:consumed])
    alone = ddpio.Loader(dataset_96px, batch_size=BATCH, image_size=32, seed=SEED)
    alone.load_state_dict(states[0])
    rest = [i for batch in alone for i in batch["indices"].tolist()]
    assert rest == order[consumed:]  # every remaining sample once, none of the consumed ones


def test_standalone_without_a_process_group_says_what_to_do(dataset_96px, tmp_path):
    script = tmp_path / "alone.py"
    script.write_text(textwrap.dedent(f'''
        import ddpio
        ddpio.Loader({str(dataset_96px)!r}, batch_size=4, image_size=32, group_size=2)
    '''))
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
               "--redirects", "1", "--tee", "1", str(script)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert result.returncode != 0
    assert "FailedPreconditionError" in result.stdout + result.stderr
    assert "init_process_group() before creating the ddpio.Loader" in result.stdout + result.stderr
