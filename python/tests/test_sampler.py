"""ddpio.DistributedSampler against torch.utils.data.DistributedSampler, and ddpio's extras."""
import copy
import os
import pickle
import random
import subprocess
import sys

import pytest

import ddpio


def torch_indices(n, replicas, rank, shuffle, seed, epoch, drop_last):
    from torch.utils.data import DistributedSampler

    s = DistributedSampler(range(n), num_replicas=replicas, rank=rank, shuffle=shuffle, seed=seed,
                           drop_last=drop_last)
    s.set_epoch(epoch)
    return list(s), len(s)


def test_every_rank_gets_torchs_indices_over_random_configurations():
    rng = random.Random(20261123)
    checked = 0
    for _ in range(300):
        n = rng.choice([1, 2, 7, 10, 33, 100, 257, rng.randrange(1, 5000)])
        replicas = rng.randrange(1, 12)
        shuffle = rng.random() < 0.8
        seed = rng.choice([0, 1, 42, -7, 2**31 + 5, rng.randrange(2**40)])
        drop_last = rng.random() < 0.3
        for rank in range(replicas):
            ours = ddpio.DistributedSampler(n, num_replicas=replicas, rank=rank, shuffle=shuffle, seed=seed,
                                            drop_last=drop_last)
            for epoch in (0, 1, rng.randrange(2, 1000)):  # epoch changes on one sampler
                ours.set_epoch(epoch)
                expected, expected_len = torch_indices(n, replicas, rank, shuffle, seed, epoch, drop_last)
                assert list(ours) == expected, (n, replicas, rank, shuffle, seed, epoch, drop_last)
                assert len(ours) == expected_len
                checked += 1
    assert checked > 1000


def test_negative_epochs_seed_as_torchs():
    for seed in (0, 5, -3):
        ours = ddpio.DistributedSampler(20, num_replicas=2, rank=1, seed=seed)
        ours.set_epoch(-1)
        assert list(ours) == torch_indices(20, 2, 1, True, seed, -1, False)[0]


def test_drop_in_as_the_sampler_of_torchs_dataloader():
    import torch.utils.data

    data = list(range(103))
    ours = ddpio.DistributedSampler(data, num_replicas=4, rank=1, seed=3)
    theirs = torch.utils.data.DistributedSampler(data, num_replicas=4, rank=1, seed=3)
    for epoch in (0, 5):
        ours.set_epoch(epoch)
        theirs.set_epoch(epoch)
        got = [b.tolist() for b in torch.utils.data.DataLoader(data, batch_size=8, sampler=ours)]
        want = [b.tolist() for b in torch.utils.data.DataLoader(data, batch_size=8, sampler=theirs)]
        assert got == want
    assert (ours.num_samples, ours.total_size) == (theirs.num_samples, theirs.total_size)


def test_world_from_the_environment_and_from_torch_distributed(tmp_path, monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "4")
    monkeypatch.setenv("RANK", "2")
    monkeypatch.setenv("LOCAL_RANK", "2")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "4")
    s = ddpio.DistributedSampler(10)
    assert (s.num_replicas, s.rank) == (4, 2)
    # An initialised process group wins over the environment, as in torch.
    code = ("import os, torch.distributed as dist, ddpio\n"
            f"dist.init_process_group('gloo', init_method='file://{tmp_path}/store', world_size=1, rank=0)\n"
            "s = ddpio.DistributedSampler(10)\n"
            "print(s.num_replicas, s.rank)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "WORLD_SIZE": "4", "RANK": "2"})
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["1", "0"]


def test_invalid_arguments_are_value_errors():
    with pytest.raises(ValueError, match=r"Invalid rank 4, rank should be in the interval \[0, 3\]"):
        ddpio.DistributedSampler(10, num_replicas=4, rank=4)
    with pytest.raises(ValueError, match=r"num_replicas must be in \[1, "):
        ddpio.DistributedSampler(10, num_replicas=0, rank=0)
    with pytest.raises(ValueError, match="num_replicas"):
        ddpio.DistributedSampler(10, num_replicas=2**40, rank=0)
    with pytest.raises(ValueError, match="dataset size"):
        ddpio.DistributedSampler(10**30, num_replicas=1, rank=0)
    with pytest.raises(ValueError, match="at most|more than"):  # the core's bound on a permutation in memory
        list(ddpio.DistributedSampler(2**60, num_replicas=1, rank=0))
    with pytest.raises(ValueError, match="padding must be one of"):
        ddpio.DistributedSampler(10, num_replicas=1, rank=0, padding="wrap")
    with pytest.raises(ValueError, match="contradicts"):
        ddpio.DistributedSampler(10, num_replicas=1, rank=0, drop_last=True, padding="mask")
    with pytest.raises(ValueError, match="permutation"):
        ddpio.DistributedSampler(10, num_replicas=1, rank=0, permutation="numpy")
    with pytest.raises(ValueError, match="epoch"):
        ddpio.DistributedSampler(10, num_replicas=1, rank=0).set_epoch(2**64)


def test_mask_flags_exactly_the_padding():
    # 10 samples on 4 ranks: 12 slots, the last 2 are duplicates (ranks 2 and 3's last sample).
    streams = [ddpio.DistributedSampler(10, num_replicas=4, rank=r, padding="mask", seed=9).stream()
               for r in range(4)]
    padded = ddpio.DistributedSampler(10, num_replicas=4, rank=3, seed=9)
    assert streams[3][0].tolist() == list(padded)  # same indices as "pad"
    real = [i for idx, pad in streams for i, p in zip(idx.tolist(), pad.tolist()) if not p]
    assert sorted(real) == list(range(10))
    assert [pad.tolist() for _, pad in streams] == [[False] * 3, [False] * 3, [False, False, True],
                                                     [False, False, True]]


def test_resume_mid_epoch_same_world_and_elastic():
    n, replicas, seed, epoch = 1000, 4, 5, 3
    full = []
    consumed = set()
    state = None
    for rank in range(replicas):
        s = ddpio.DistributedSampler(n, num_replicas=replicas, rank=rank, seed=seed, padding="none")
        s.set_epoch(epoch)
        stream = list(s)
        full.append(stream)
        consumed.update(stream[:40])
        state = s.state_dict(samples_seen=40)  # the same on every rank: 40 steps of 4 ranks
    assert state["start"] == 160 and state["epoch"] == epoch

    same = ddpio.DistributedSampler(n, num_replicas=replicas, rank=2, seed=seed, padding="none")
    same.load_state_dict(state)
    assert list(same) == full[2][40:]

    rest = []
    for rank in range(3):  # elastic: 3 ranks take over the remaining 840
        s = ddpio.DistributedSampler(n, num_replicas=3, rank=rank, seed=seed, padding="none")
        s.load_state_dict(state)
        rest.extend(s)
    assert len(rest) == len(set(rest)) == n - 160
    assert set(rest) | consumed == set(range(n)) and not (set(rest) & consumed)

    s.set_epoch(epoch + 1)  # the resumed position belongs to its epoch only
    assert len(s) == len(list(s)) == 333  # rank 2 of 3 over 1000, no padding

    with pytest.raises(ValueError, match="seed"):
        ddpio.DistributedSampler(n, num_replicas=3, rank=0, seed=6).load_state_dict(state)


def test_state_dict_counts_what_the_iterator_handed_out():
    s = ddpio.DistributedSampler(100, num_replicas=2, rank=0)
    it = iter(s)
    for _ in range(10):
        next(it)
    assert s.state_dict()["start"] == 20


def test_importing_ddpio_does_not_import_torch():
    out = subprocess.run([sys.executable, "-c", "import sys, ddpio; ddpio.DistributedSampler(5, 1, 0); "
                          "print('torch' in sys.modules)"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


def test_state_at_the_top_of_an_epoch_is_the_epochs_start():
    s = ddpio.DistributedSampler(10, num_replicas=1, rank=0)
    list(s)
    s.set_epoch(1)
    assert s.state_dict()["start"] == 0 and s.state_dict()["epoch"] == 1


def test_a_resumed_position_is_used_once():
    s = ddpio.DistributedSampler(100, num_replicas=2, rank=0, seed=1)
    state = dict(s.state_dict(samples_seen=10), start=20)
    s.load_state_dict(state)
    first = list(s)
    assert len(first) == 40
    again = list(s)  # the same epoch again, as torch repeats it without set_epoch: all of it
    assert len(again) == 50 and again[10:] == first
    assert s.state_dict()["start"] == 100


def test_torchs_attributes_follow_the_padding():
    none = ddpio.DistributedSampler(10, num_replicas=3, rank=2, padding="none")
    assert (none.num_samples, len(none), none.total_size) == (3, 3, 10)
    pad = ddpio.DistributedSampler(10, num_replicas=3, rank=2)
    assert (pad.num_samples, pad.total_size) == (4, 12)


def test_a_used_sampler_pickles_and_copies():
    s = ddpio.DistributedSampler(50, num_replicas=2, rank=1, seed=4)
    s.set_epoch(3)
    expected = list(s)
    for clone in (pickle.loads(pickle.dumps(s)), copy.deepcopy(s)):
        assert list(clone) == expected


def test_a_dataset_that_changes_size_is_an_error():
    data = list(range(10))
    s = ddpio.DistributedSampler(data, num_replicas=1, rank=0)
    data.extend(range(4))
    with pytest.raises(ValueError, match="had 10 samples"):
        iter(s)


def test_iterating_needs_no_numpy():
    code = ("import sys\nsys.modules['numpy'] = None\nimport ddpio\n"
            "print(list(ddpio.DistributedSampler(5, 1, 0, shuffle=False)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[0, 1, 2, 3, 4]"
