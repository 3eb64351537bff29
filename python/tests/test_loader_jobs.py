"""ddpio.Loader in jobs started the ways PyTorch users start them: torch.multiprocessing.spawn with
init_process_group over file:// and tcp:// (the loader takes rank and world from the process
group and joins through its store), members of a group naming different datasets or creating
their loaders in different orders (the whole group refuses, naming who and what), a launcher's
environment that contradicts the process group, and launcher variables without a launcher."""
import json
import os
import socket
import subprocess
import sys
import textwrap

import pytest
import torch.utils.data

import ddpio

SCRIPT = textwrap.dedent('''
    import json, os, sys
    import torch.distributed as dist
    import torch.multiprocessing as mp
    import ddpio

    def work(rank, world, init, paths, out, group_size, case):
        dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world)
        result = {"rank": rank}
        try:
            if case == "order":  # rank 0 makes loader A then B, rank 1 B then A
                sizes = (4, 8) if rank == 0 else (8, 4)
                loaders = [ddpio.Loader(paths[rank], batch_size=s, image_size=32, group_size=group_size,
                                        timeout=30) for s in sizes]
            loader = ddpio.Loader(paths[rank], batch_size=4, image_size=32, group_size=group_size, seed=7,
                                  timeout=30)
            result.update(loader_rank=loader.rank, world=loader.world_size,
                          indices=[i for b in loader for i in b["indices"].tolist()],
                          read=loader.counters()["records_read"])
        except Exception as e:
            result["error"] = type(e).__name__ + ": " + str(e)
        with open(os.path.join(out, f"rank{rank}.json"), "w") as f:
            json.dump(result, f)
        dist.destroy_process_group()

    if __name__ == "__main__":
        init, out, group_size, case = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
        paths = sys.argv[5:]
        mp.spawn(work, args=(len(paths), init, paths, out, group_size, case), nprocs=len(paths))
''')


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def spawn(tmp_path, paths, group_size=1, init="file", case="plain", env=None):
    script = tmp_path / "spawned.py"
    script.write_text(SCRIPT)
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    method = f"file://{tmp_path / 'rendezvous'}" if init == "file" else f"tcp://127.0.0.1:{free_port()}"
    run_env = dict(os.environ)
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        run_env.pop(name, None)
    run_env.update(env or {})
    result = subprocess.run([sys.executable, str(script), method, str(out), str(group_size), case,
                             *map(str, paths)], capture_output=True, text=True, timeout=180, env=run_env)
    assert result.returncode == 0, result.stderr
    return [json.loads((out / f"rank{r}.json").read_text()) for r in range(len(paths))]


def torch_share(n, rank, world, seed=7):
    sampler = torch.utils.data.DistributedSampler(range(n), num_replicas=world, rank=rank, shuffle=True, seed=seed)
    return list(sampler)


@pytest.mark.parametrize("init, group_size", [("file", 1), ("tcp", 1), ("file", 2)])
def test_spawned_ranks_take_the_process_groups_rank_and_see_disjoint_halves(dataset, tmp_path, init, group_size):
    n = len(ddpio.Dataset(dataset))
    ranks = spawn(tmp_path, [dataset, dataset], group_size=group_size, init=init)
    for r, got in enumerate(ranks):
        assert "error" not in got, got
        assert (got["loader_rank"], got["world"]) == (r, 2)
        assert got["indices"] == torch_share(n, r, 2)
    # Disjoint but for the sampler's padding (n is odd: one sample twice, as torch pads).
    padded = set(torch_share(n, 0, 2)) & set(torch_share(n, 1, 2))
    assert set(ranks[0]["indices"]) & set(ranks[1]["indices"]) == padded and len(padded) == n % 2
    assert set(ranks[0]["indices"]) | set(ranks[1]["indices"]) == set(range(n))
    if group_size == 2:
        assert ranks[0]["read"] > 0 and ranks[1]["read"] == 0  # only the leader read


def test_a_peer_naming_a_missing_dataset_fails_the_whole_group_naming_it(dataset, tmp_path):
    missing = tmp_path / "no-such-dataset"
    leader, peer = spawn(tmp_path, [dataset, missing], group_size=2)
    assert peer["error"].startswith("NotFoundError"), peer
    assert leader["error"].startswith("NotFoundError"), leader
    assert "group member 1 (rank 1)" in leader["error"] and str(missing) in leader["error"], leader


def test_a_peer_naming_another_dataset_fails_the_whole_group_naming_both(dataset, dataset_96px, tmp_path):
    leader, peer = spawn(tmp_path, [dataset, dataset_96px], group_size=2)
    for got in (leader, peer):
        assert got["error"].startswith("InvalidArgumentError"), got
        assert str(dataset) in got["error"] and str(dataset_96px) in got["error"], got
        assert "group member 1 (rank 1)" in got["error"], got


def test_a_copy_of_the_dataset_at_another_path_is_the_same_dataset(dataset, tmp_path):
    import shutil
    copy = tmp_path / "copy.lmdb"
    shutil.copytree(dataset, copy)
    leader, peer = spawn(tmp_path, [dataset, copy], group_size=2)
    assert "error" not in leader and "error" not in peer, (leader, peer)


def test_loaders_created_in_different_orders_say_so_and_name_the_setting(dataset, tmp_path):
    for got in spawn(tmp_path, [dataset, dataset], group_size=2, case="order"):
        assert got["error"].startswith("InvalidArgumentError"), got
        assert "batch_size 8 (the leader: 4)" in got["error"] or "batch_size 4 (the leader: 8)" in got["error"], got
        assert "in different orders" in got["error"], got


def test_an_environment_contradicting_the_process_group_is_refused_naming_both(dataset, tmp_path):
    # torchrun-style variables that say rank 1 of 3, under a process group of 2 ranks.
    ranks = spawn(tmp_path, [dataset, dataset], env={"RANK": "1", "WORLD_SIZE": "3"})
    for r, got in enumerate(ranks):
        assert got["error"].startswith("InvalidArgumentError"), got
        assert f"torch.distributed is rank {r} of 2" in got["error"] and "rank 1 of 3" in got["error"], got


@pytest.mark.parametrize("env, says", [
    ({"WORLD_SIZE": "2", "RANK": "0"}, "rank 0 of 2 according to RANK/WORLD_SIZE"),
    ({"WORLD_SIZE": "2"}, "a world size (from torchrun's"),
])
def test_launcher_variables_without_a_launcher_say_what_is_wrong(dataset, env, says):
    code = (f"import ddpio\ntry:\n    ddpio.Loader({str(dataset)!r}, batch_size=4, timeout=5)\n"
            "except ddpio.Error as e:\n    print(type(e).__name__, e)\n")
    run_env = dict(os.environ)
    for name in ("RANK", "WORLD_SIZE", "DDPIO_STORE_TOKEN"):
        run_env.pop(name, None)
    run_env.update(env)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=run_env)
    assert result.returncode == 0, result.stderr
    assert says in result.stdout, result.stdout
    assert "launch" in result.stdout, result.stdout
