"""The block order from Python under torchrun, on a dataset in the object store: 2 ranks on one
node share a cache folder. Every epoch each sample goes to exactly one rank (the sampler pads as
in the exact order), a rank keeps to window + 2 of the order's chunks at a time and to chunks of
its own, the
order is the same when asked again and changes with the epoch, and the node fetches each record
from the store once over the whole run (the ranks' claims on the shared folder). Runs against the
S3 server the test command starts; skipped without one unless DDPIO_REQUIRE_S3 is set."""
import json
import os
import subprocess
import sys
import textwrap

import pytest

from conftest import uploaded
from test_loader_torchrun import free_loopback_port

WORLD, BATCH, CHUNK, WINDOW, EPOCHS = 2, 4, 8, 2, 2

SCRIPT = textwrap.dedent('''
    import json, os, sys
    import ddpio

    url, cache, out = sys.argv[1], sys.argv[2], sys.argv[3]
    options = dict(batch_size=BATCH, image_size=32, seed=5, order="block", block_chunk=CHUNK,
                   block_window=WINDOW, cache_dir=cache)
    record = {"rank": int(os.environ["RANK"]), "epochs": []}
    loader = ddpio.Loader(url, **options)
    for epoch in range(EPOCHS):
        loader.set_epoch(epoch)
        record["epochs"].append([i for batch in loader for i in batch["indices"].tolist()])
    record["counters"] = loader.counters()
    loader.close()
    again = ddpio.Loader(url, **options)  # epoch 0 again, in a loader of its own
    again.set_epoch(0)
    record["again"] = [i for batch in again for i in batch["indices"].tolist()]
    record["again_counters"] = again.counters()
    again.close()
    with open(os.path.join(out, f"rank{record['rank']}.json"), "w") as f:
        json.dump(record, f)
''').replace("BATCH", str(BATCH)).replace("CHUNK", str(CHUNK)).replace("WINDOW", str(WINDOW)) \
    .replace("EPOCHS", str(EPOCHS))


@pytest.fixture(scope="module")
def remote_96px(program, dataset_96px):
    return uploaded(program, dataset_96px, f"ddpio-py-block-{os.getpid()}")


def test_two_ranks_in_the_block_order_share_the_epoch_once_and_the_node_fetches_once(remote_96px, tmp_path):
    script = tmp_path / "block.py"
    script.write_text(SCRIPT)
    cache = tmp_path / "cache"
    cache.mkdir()
    command = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "1", "--master_addr", "127.0.0.1",
               "--master_port", str(free_loopback_port()), "--nproc_per_node", str(WORLD),
               "--redirects", "1", "--tee", "1", str(script), remote_96px, str(cache), str(tmp_path)]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, f"torchrun exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
    records = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(WORLD)]
    n = 99
    per_rank = -(-n // WORLD)
    for epoch in range(EPOCHS):
        got = [records[r]["epochs"][epoch] for r in range(WORLD)]
        assert [len(g) for g in got] == [per_rank] * WORLD, epoch
        seen = sorted(i for g in got for i in g)
        assert sorted(set(seen)) == list(range(n)), f"epoch {epoch}: a sample missed"
        assert len(seen) - n == per_rank * WORLD - n, f"epoch {epoch}: duplicates beyond the padding"
        for r, g in enumerate(got):
            # At any point a rank has at most window + 2 chunks started and not finished (of its
            # own records of each chunk): what its cache must hold (docs/SAMPLER.md).
            first, last = {}, {}
            for k, i in enumerate(g):
                first.setdefault(i // CHUNK, k)
                last[i // CHUNK] = k
            most = max(sum(1 for c in first if first[c] <= k <= last[c]) for k in range(len(g)))
            assert most <= WINDOW + 2, (epoch, r, most, g)
            assert len(first) < -(-n // CHUNK), f"epoch {epoch}, rank {r}: every chunk, as in the exact order"
            assert g != sorted(g), f"epoch {epoch}, rank {r}: not shuffled"
    for r in range(WORLD):
        assert records[r]["epochs"][0] != records[r]["epochs"][1], f"rank {r}: epoch 1 repeats epoch 0"
        assert records[r]["again"] == records[r]["epochs"][0], f"rank {r}: epoch 0 is not the same asked again"
    # The node fetched each record once over both epochs and both loaders: what one rank fetched
    # the other read from the shared folder.
    fetched = sum(records[r]["counters"]["store_records_fetched"] for r in range(WORLD))
    assert fetched == n, [records[r]["counters"] for r in range(WORLD)]
    assert sum(records[r]["again_counters"]["store_records_fetched"] for r in range(WORLD)) == 0
    assert all(records[r]["again_counters"]["store_disk_hits"] > 0 for r in range(WORLD))
