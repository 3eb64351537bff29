"""ddpio.Loader's resume states: state_dict() says where the next pass starts until it starts (a
checkpoint taken right after load_state_dict or set_epoch trains nothing twice); a state carries
what the epoch's order depends on and a loader of another order refuses it, naming the
difference, while what does not change the order (a copy of the dataset, the world size, the
seed of an unshuffled order) is accepted; the state's numbers are integers; a state of an older
ddpio is taken with a warning; a loader opens its dataset once; and a loader goes on from a state
after a data error, reading alone or in a group. Resume on another world size is in test_loader_torchrun.py
(4 ranks to 1)."""
import collections
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap

import pytest

import ddpio
import ddpio.sampler

OPTIONS = dict(batch_size=4, image_size=32, seed=5, workers=2, arrays="numpy")


def passes(loader):
    return [batch["indices"].tolist() for batch in loader]


def stopped_after(dataset, steps, epoch=3, **options):
    """The state of a loader stopped after `steps` batches of `epoch`, and the indices it trained."""
    loader = ddpio.Loader(dataset, **{**OPTIONS, **options})
    loader.set_epoch(epoch)
    it = iter(loader)
    taken = [next(it)["indices"].tolist() for _ in range(steps)]
    state = loader.state_dict()
    loader.close()
    return state, taken


# --- state_dict before the next pass starts --------------------------------------------------------
def test_a_state_taken_right_after_load_state_dict_is_the_loaded_one_and_trains_every_sample_once(dataset):
    n = len(ddpio.Dataset(dataset))
    state, taken = stopped_after(dataset, 2)
    assert state["epoch"] == 3 and state["position"] == 8
    # Restarted, then stopped again before its first step: the checkpoint it writes.
    restarted = ddpio.Loader(dataset, **OPTIONS)
    restarted.load_state_dict(state)
    checkpoint = restarted.state_dict()
    assert checkpoint == state
    restarted.close()
    last = ddpio.Loader(dataset, **OPTIONS)
    last.load_state_dict(checkpoint)
    rest = passes(last)
    tally = collections.Counter(i for batch in taken + rest for i in batch)
    assert sorted(tally) == list(range(n)) and set(tally.values()) == {1}, tally


def test_set_epoch_keeps_a_loaded_position_for_its_own_epoch_only(dataset):
    whole = passes_of_epoch(dataset, 3)
    state, _ = stopped_after(dataset, 2)
    loader = ddpio.Loader(dataset, **OPTIONS)
    loader.load_state_dict(state)
    loader.set_epoch(3)  # the loop's habit, at the top of every epoch: the resumed epoch continues
    assert loader.state_dict() == state
    assert passes(loader) == whole[2:]
    loader.load_state_dict(state)
    loader.set_epoch(4)  # another epoch: from its start
    assert (loader.state_dict()["epoch"], loader.state_dict()["position"]) == (4, 0)
    assert passes(loader) == passes_of_epoch(dataset, 4)


def test_state_dict_follows_set_epoch_and_an_abandoned_pass(dataset):
    n = len(ddpio.Dataset(dataset))
    loader = ddpio.Loader(dataset, **OPTIONS)
    loader.set_epoch(0)
    passes(loader)
    assert (loader.state_dict()["epoch"], loader.state_dict()["position"]) == (0, n)  # the epoch done
    loader.set_epoch(1)  # a checkpoint here must not skip epoch 1
    assert (loader.state_dict()["epoch"], loader.state_dict()["position"]) == (1, 0)
    it = iter(loader)
    first = next(it)["indices"].tolist()
    del it  # abandoned after one step: the state is what that step consumed
    state = loader.state_dict()
    assert (state["epoch"], state["position"]) == (1, 4)
    resumed = ddpio.Loader(dataset, **OPTIONS)
    resumed.load_state_dict(state)
    assert [first] + passes(resumed) == passes_of_epoch(dataset, 1)


def passes_of_epoch(dataset, epoch):
    loader = ddpio.Loader(dataset, **OPTIONS)
    loader.set_epoch(epoch)
    return passes(loader)


# --- a state of another order is refused ----------------------------------------------------------
@pytest.fixture(scope="module")
def another_conversion(program, imagefolder, tmp_path_factory):
    """The same images converted again: the same size, another dataset (its own id)."""
    out = tmp_path_factory.mktemp("again") / "train.lmdb"
    subprocess.run([program, "convert", "--src", str(imagefolder), "--out", str(out), "--quiet"], check=True,
                   capture_output=True, timeout=300)
    return out


@pytest.mark.parametrize("changed, says", [
    ({"seed": 2}, "the state was taken with seed 5; this loader has seed 2"),
    ({"shuffle": False}, "the state was taken with shuffle=True; this loader has shuffle=False"),
    ({"padding": "drop"}, "the state was taken with padding 'pad'; this loader has padding 'drop'"),
    ({"permutation": "feistel"}, "the state was taken with permutation 'torch'; this loader has permutation "
                                 "'feistel'"),
    ({"order": "block"}, "the state was taken in the 'exact' order; this loader has order='block'"),
])
def test_a_state_of_another_order_is_refused_naming_the_difference(dataset, changed, says):
    state, _ = stopped_after(dataset, 2)
    loader = ddpio.Loader(dataset, **{**OPTIONS, **changed})
    with pytest.raises(ValueError, match=says):
        loader.load_state_dict(state)
    assert loader.state_dict()["position"] == 0  # nothing taken from the refused state


BLOCK = dict(order="block", block_chunk=4, block_window=2)


def test_a_block_order_state_resumes_every_sample_once_and_one_of_another_block_is_refused(dataset):
    n = len(ddpio.Dataset(dataset))
    state, taken = stopped_after(dataset, 2, **BLOCK)
    assert (state["order"], state["block_chunk"], state["block_window"], state["block_lanes"]) == ("block", 4, 2, 1)
    resumed = ddpio.Loader(dataset, **OPTIONS, **BLOCK)
    resumed.load_state_dict(state)
    rest = passes(resumed)
    tally = collections.Counter(i for batch in taken + rest for i in batch)
    assert sorted(tally) == list(range(n)) and set(tally.values()) == {1}, tally
    assert taken + rest != passes_of_epoch(dataset, 3)  # not the exact order
    # A state of the exact order taken before the block order existed (version 2, or none) is refused.
    older, _ = stopped_after(dataset, 2)
    block_loader = ddpio.Loader(dataset, **OPTIONS, **BLOCK)
    for old in ({**older, "version": 2}, {k: v for k, v in older.items() if k not in ("version", "order")}):
        with pytest.raises(ValueError, match="order"):
            block_loader.load_state_dict(old)
    with pytest.raises(ValueError, match="Loader.sampler gives the exact order"):
        block_loader.sampler
    block_loader.close()
    for changed, says in (({"block_window": 3}, "block_window=2; this loader has block_window=3"),
                          ({"block_chunk": 5}, "block_chunk=4; this loader has block_chunk=5"),
                          ({"block_lanes": 2}, "block_lanes=1; this loader has block_lanes=2 .* pass block_lanes=1")):
        loader = ddpio.Loader(dataset, **OPTIONS, **{**BLOCK, **changed})
        with pytest.raises(ValueError, match=says):
            loader.load_state_dict(state)
        loader.close()


def test_a_state_of_another_dataset_of_the_same_size_is_refused(dataset, another_conversion):
    state, _ = stopped_after(dataset, 2)
    other = ddpio.Loader(another_conversion, **OPTIONS)
    assert other.dataset_size == state["dataset_size"]
    with pytest.raises(ValueError, match="the state was taken on another dataset .*" + re.escape(str(another_conversion))):
        other.load_state_dict(state)


def test_what_leaves_the_order_alone_is_accepted(dataset, tmp_path):
    whole = [i for batch in passes_of_epoch(dataset, 3) for i in batch]
    state, _ = stopped_after(dataset, 2)
    # A copy at another path is the same dataset; batch size, workers and mode are not the order.
    copy = tmp_path / "copy.lmdb"
    shutil.copytree(dataset, copy)
    loader = ddpio.Loader(copy, **{**OPTIONS, "batch_size": 3, "workers": 1, "mode": "replicate"})
    loader.load_state_dict(state)
    assert loader.state_dict() == state
    assert [i for batch in passes(loader) for i in batch] == whole[8:]
    # Unshuffled, every seed and permutation give the same order.
    plain, _ = stopped_after(dataset, 2, shuffle=False, seed=1)
    ddpio.Loader(dataset, **{**OPTIONS, "shuffle": False, "seed": 2, "permutation": "feistel"}).load_state_dict(plain)


@pytest.mark.parametrize("key", ["epoch", "position"])
@pytest.mark.parametrize("value", [3.9, True, "3", None])
def test_the_epoch_and_position_must_be_integers(dataset, key, value):
    state, _ = stopped_after(dataset, 2)
    loader = ddpio.Loader(dataset, **OPTIONS)
    with pytest.raises(ValueError, match=f"the state's {key} must be an integer, got {value!r}"):
        loader.load_state_dict({**state, key: value})


def test_a_state_of_an_older_ddpio_is_taken_with_a_warning(dataset):
    whole = passes_of_epoch(dataset, 3)
    old = {"epoch": 3, "position": 8, "dataset_size": len(ddpio.Dataset(dataset))}  # ddpio before version 2
    loader = ddpio.Loader(dataset, **OPTIONS)
    with pytest.warns(UserWarning, match="the state has no version .* cannot check"):
        loader.load_state_dict(old)
    assert passes(loader) == whole[2:]
    with pytest.raises(ValueError, match="dataset of 22 samples"):
        loader.load_state_dict({**old, "dataset_size": 22})
    with pytest.raises(ValueError, match="unknown ddpio.Loader state version 7"):
        loader.load_state_dict({**loader.state_dict(), "version": 7})


# --- the dataset is opened once ---------------------------------------------------------------------
def test_a_loader_opens_its_dataset_once(dataset, monkeypatch):
    # The pipeline opens it; the loader opens no ddpio.Dataset of its own beside it (from an object
    # store that was a second manifest and index), also without torch installed.
    opened = []
    real = ddpio._ddpio.Dataset

    def counting(*args):
        opened.append(args)
        return real(*args)

    monkeypatch.setattr(ddpio._ddpio, "Dataset", counting)
    whole = passes_of_epoch(dataset, 3)
    monkeypatch.setattr(ddpio.sampler, "_torch_version", lambda: None)
    assert passes_of_epoch(dataset, 3) == whole
    assert opened == []


# --- after an error ------------------------------------------------------------------------------
def damaged_copy(program, dataset, tmp_path, record=13):
    """A copy of `dataset` whose record's stored bytes are damaged in data.mdb (its CRC fails)."""
    damaged = tmp_path / "damaged.lmdb"
    shutil.copytree(dataset, damaged)
    payload = tmp_path / "record.jpg"
    subprocess.run([program, "inspect", str(dataset), "--get", str(record), "--out", str(payload)], check=True,
                   capture_output=True)
    stored = payload.read_bytes()
    data = bytearray((damaged / "data.mdb").read_bytes())
    at = data.find(stored)
    assert at > 0, f"record {record}'s payload is not in the file as one piece"
    data[at + len(stored) // 2] ^= 0x55
    (damaged / "data.mdb").write_bytes(bytes(data))
    return damaged


def test_a_loader_reading_alone_goes_on_from_its_state_after_an_error(program, dataset, tmp_path):
    """A record that fails its checksum ends the pass with DataLossError; the loader is not dead
    for good (it used to raise "the group feeder failed earlier" from then on): resumed from its
    own state it runs again, up to the same bad record, every batch before it the same."""
    damaged = damaged_copy(program, dataset, tmp_path)
    loader = ddpio.Loader(damaged, **{**OPTIONS, "shuffle": False})
    seen = []
    with pytest.raises(ddpio.DataLossError):
        for batch in loader:
            seen.append(batch["indices"].tolist())
    assert seen == [list(range(k, k + 4)) for k in range(0, 12, 4)]
    state = loader.state_dict()
    assert state["position"] == 12
    loader.load_state_dict(state)
    with pytest.raises(ddpio.DataLossError) as again:
        next(iter(loader))
    assert "13" in str(again.value)


GROUP = textwrap.dedent('''
    import json, os, sys
    import torch.distributed as dist
    import torch.multiprocessing as mp
    import ddpio

    def passes(loader):
        """The batches of a pass up to its error, and the error."""
        seen = []
        try:
            for batch in loader:
                seen.append(batch["indices"].tolist())
            return seen, None
        except Exception as e:
            return seen, type(e).__name__ + ": " + str(e)

    def work(rank, world, init, path, out):
        dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world)
        loader = ddpio.Loader(path, batch_size=4, image_size=32, group_size=2, seed=7, timeout=60,
                              arrays="numpy")
        loader.set_epoch(2)
        state = loader.state_dict()  # the checkpoint every rank took before the epoch
        result = {"rank": rank}
        result["first"], result["first_error"] = passes(loader)
        dist.barrier()  # every rank caught its error, as a training loop would
        loader.load_state_dict(state)
        result["again"], result["again_error"] = passes(loader)
        with open(os.path.join(out, f"rank{rank}.json"), "w") as f:
            json.dump(result, f)
        dist.destroy_process_group()

    if __name__ == "__main__":
        init, out, path = sys.argv[1], sys.argv[2], sys.argv[3]
        mp.spawn(work, args=(2, init, path, out), nprocs=2)
''')


def test_a_group_goes_on_from_a_shared_state_after_a_data_error(program, dataset, tmp_path):
    """Round 3, finding 11, in a group: the leader's data error (a bad record here; a store failing
    past its retry budget the same way) reaches its peer as the run's last message, and the group
    stays whole: both ranks load the state they took before the epoch and run again — the same
    batches up to the same error — where every member used to be dead for good."""
    damaged = damaged_copy(program, dataset, tmp_path)
    script = tmp_path / "group.py"
    script.write_text(GROUP)
    out = tmp_path / "out"
    out.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR",
                                                           "MASTER_PORT")}
    result = subprocess.run([sys.executable, str(script), f"file://{tmp_path / 'rendezvous'}", str(out),
                             str(damaged)], capture_output=True, text=True, timeout=180, env=env)
    assert result.returncode == 0, result.stderr
    for r in range(2):
        got = json.loads((out / f"rank{r}.json").read_text())
        assert got["first_error"] and got["first_error"].startswith("DataLossError"), (got, result.stderr)
        assert "13" in got["first_error"], got
        assert got["again_error"] == got["first_error"], (got, result.stderr)
        assert got["again"] == got["first"], got
