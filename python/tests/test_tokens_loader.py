"""ddpio.Loader(path, seq_len=S) over a token dataset: packing as Megatron's GPTDataset packs
(windows of S + 1 ids over the epoch's documents concatenated), documents shuffled as
torch.randperm(seed + epoch), the same sequences on every world size, each exactly once per epoch
across ranks, and a resume mid-epoch on another world size that completes the epoch exactly."""
import numpy as np
import pytest

import ddpio

EOS = 0


@pytest.fixture(scope="module")
def docs():
    """Documents whose ids say where they are: document d's i-th id is d * 1000 + i + 1 (never the
    EOS, 0, which ends each)."""
    rng = np.random.default_rng(3)
    return [[d * 1000 + i + 1 for i in range(int(rng.integers(0, 60)))] + [EOS] for d in range(150)]


@pytest.fixture(scope="module")
def token_dataset(docs, tmp_path_factory):
    d = tmp_path_factory.mktemp("tokens")
    np.array([i for doc in docs for i in doc], dtype=np.uint32).tofile(d / "flat.bin")
    ddpio.convert(d / "flat.bin", d / "ds", source="tokens", dtype="uint32", eos=EOS)
    return d / "ds"


def sequences(loader):
    """{sequence index: (tokens, labels, loss_mask)} of one pass, numpy."""
    out = {}
    for b in loader:
        for r, k in enumerate(b["indices"].tolist()):
            if b["loss_mask"][r].sum() > 0:
                assert k not in out, f"sequence {k} twice"
                out[k] = (b["tokens"][r].copy(), b["labels"][r].copy())
    return out


def test_unshuffled_one_rank_is_the_documents_in_order(token_dataset, docs):
    stream = np.array([i for d in docs for i in d])
    loader = ddpio.Loader(token_dataset, batch_size=5, seq_len=17, shuffle=False, arrays="numpy")
    got = sequences(loader)
    n = (len(stream) - 1) // 17
    assert sorted(got) == list(range(n))
    for k, (tokens, labels) in got.items():
        assert tokens.tolist() == stream[k * 17:(k + 1) * 17].tolist()
        assert labels.tolist() == stream[k * 17 + 1:(k + 1) * 17 + 1].tolist()


def test_documents_are_shuffled_as_torch_randperm_of_seed_plus_epoch(token_dataset, docs):
    torch = pytest.importorskip("torch")
    loader = ddpio.Loader(token_dataset, batch_size=8, seq_len=32, seed=11)
    loader.set_epoch(2)
    order = []
    for b in loader:
        for row in b["tokens"].tolist():
            for t in row:
                if t != EOS and (not order or order[-1] != (t - 1) // 1000):
                    order.append((t - 1) // 1000)
    perm = torch.randperm(len(docs), generator=torch.Generator().manual_seed(13)).tolist()
    expected = [d for d in perm if len(docs[d]) > 1][:len(order)]
    assert order == expected


def test_every_world_size_sees_the_same_sequences_each_once(token_dataset):
    one = sequences(ddpio.Loader(token_dataset, batch_size=4, seq_len=20, seed=5, num_replicas=1, rank=0,
                                 arrays="numpy"))
    for world in (2, 3):
        seen = {}
        for rank in range(world):
            part = sequences(ddpio.Loader(token_dataset, batch_size=4, seq_len=20, seed=5, num_replicas=world,
                                          rank=rank, arrays="numpy"))
            assert not set(part) & set(seen), "a sequence on two ranks"
            seen.update(part)
        assert sorted(seen) == sorted(one)
        for k in one:
            assert np.array_equal(seen[k][0], one[k][0]) and np.array_equal(seen[k][1], one[k][1])


def test_a_resume_on_another_world_size_finishes_the_epoch_exactly(token_dataset):
    full = sequences(ddpio.Loader(token_dataset, batch_size=3, seq_len=16, seed=2, num_replicas=1, rank=0,
                                  arrays="numpy"))
    done, states = {}, []
    for rank in range(2):
        loader = ddpio.Loader(token_dataset, batch_size=3, seq_len=16, seed=2, num_replicas=2, rank=rank,
                              arrays="numpy")
        it = iter(loader)
        for _ in range(4):  # four steps on every rank, then the job stops
            b = next(it)
            for r, k in enumerate(b["indices"].tolist()):
                done[k] = b["tokens"][r].copy()
        states.append(loader.state_dict())
        it.close()
    assert states[0]["sampler"] == states[1]["sampler"]
    rest = {}
    for rank in range(3):
        loader = ddpio.Loader(token_dataset, batch_size=3, seq_len=16, seed=2, num_replicas=3, rank=rank,
                              arrays="numpy")
        loader.load_state_dict(states[0])
        part = sequences(loader)
        assert not set(part) & set(rest)
        rest.update(part)
    assert not set(done) & set(rest), "a sequence trained twice"
    assert sorted(set(done) | set(rest)) == sorted(full), "a sequence skipped"
    for k, (tokens, _) in rest.items():
        assert np.array_equal(tokens, full[k][0])


def test_positions_restart_at_each_document_and_cu_seqlens_follow(token_dataset):
    for b in ddpio.Loader(token_dataset, batch_size=4, seq_len=24, arrays="numpy"):
        tokens, pos, doc = b["tokens"], b["position_ids"], b["document_ids"]
        bounds = [0]
        for r in range(tokens.shape[0]):
            for c in range(1, 24):
                new_doc = tokens[r, c - 1] == EOS  # the id after an EOS starts a document
                assert pos[r, c] == (0 if new_doc else pos[r, c - 1] + 1)
                assert doc[r, c] == doc[r, c - 1] + (1 if new_doc else 0)
                if new_doc:
                    bounds.append(r * 24 + c)
            bounds.append((r + 1) * 24)
        assert b["cu_seqlens"].tolist() == bounds
        assert b["max_seqlen"] == max(np.diff(bounds))


def test_seq_len_on_an_image_dataset_is_refused(dataset):
    with pytest.raises(ValueError, match="image dataset"):
        ddpio.Loader(dataset, batch_size=2, seq_len=8)


@pytest.fixture(scope="module")
def second_dataset(tmp_path_factory):
    """Another token dataset: ids 500000 and up, so a sequence says which dataset it is from."""
    d = tmp_path_factory.mktemp("tokens2")
    rng = np.random.default_rng(9)
    docs = [[500000 + k * 100 + i for i in range(int(rng.integers(1, 30)))] + [EOS] for k in range(60)]
    np.array([i for doc in docs for i in doc], dtype=np.uint32).tofile(d / "flat.bin")
    ddpio.convert(d / "flat.bin", d / "ds", source="tokens", dtype="uint32", eos=EOS)
    return d / "ds"


def mixed(paths, weights, **kw):
    """{position: (source, tokens)} of one epoch over all ranks given in kw (default one)."""
    out = {}
    world = kw.pop("world", 1)
    for rank in range(world):
        for b in ddpio.Loader(paths, batch_size=4, seq_len=12, weights=weights, seed=4, num_replicas=world,
                              rank=rank, arrays="numpy", **kw):
            for r, k in enumerate(b["indices"].tolist()):
                if b["loss_mask"][r].sum() > 0:
                    assert k not in out
                    out[k] = (int(b["source"][r]), b["tokens"][r].copy())
    return out


def test_mixing_keeps_every_prefix_within_two_sequences_of_the_weights(token_dataset, second_dataset):
    got = mixed([token_dataset, second_dataset], [0.7, 0.3])
    counts = [0, 0]
    for n in sorted(got):
        source, tokens = got[n]
        counts[source] += 1
        # The sequence really is from the dataset it says: ids below 500000 are the first's.
        assert all((t >= 500000) == (source == 1) for t in tokens.tolist() if t != EOS)
        assert abs(counts[0] - 0.7 * (n + 1)) <= 2 and abs(counts[1] - 0.3 * (n + 1)) <= 2
    loader = ddpio.Loader([token_dataset, second_dataset], batch_size=4, seq_len=12, weights=[0.7, 0.3])
    for _ in loader:
        pass
    c = loader.counters()
    assert [s["sequences"] for s in c["sources"]] == counts
    assert c["sequences"] == sum(counts) == c["sequences_per_epoch"]


def test_a_mixture_is_the_same_on_every_world_size_and_resumes(token_dataset, second_dataset):
    paths, weights = [token_dataset, second_dataset], [0.5, 0.5]
    one = mixed(paths, weights)
    three = mixed(paths, weights, world=3)
    assert sorted(one) == sorted(three)
    assert all(one[k][0] == three[k][0] and np.array_equal(one[k][1], three[k][1]) for k in one)
    # The second dataset is smaller than half the epoch: it is read again, in another shuffle.
    per_pass = ddpio.Loader(paths, batch_size=4, seq_len=12, weights=weights).counters()["sources"][1]
    second = [tuple(t.tolist()) for s, t in (one[k] for k in sorted(one)) if s == 1]
    assert len(second) > per_pass["sequences_per_pass"]
    assert second[:per_pass["sequences_per_pass"]] != second[per_pass["sequences_per_pass"]:][:per_pass["sequences_per_pass"]]
    loader = ddpio.Loader(paths, batch_size=4, seq_len=12, weights=weights, seed=4, num_replicas=2, rank=0,
                          arrays="numpy")
    it = iter(loader)
    seen = {int(k) for _ in range(3) for k in next(it)["indices"]}
    state = loader.state_dict()
    it.close()
    other = ddpio.Loader(paths, batch_size=4, seq_len=12, weights=weights, seed=4, num_replicas=2, rank=1,
                         arrays="numpy")
    it = iter(other)
    seen |= {int(k) for _ in range(3) for k in next(it)["indices"]}
    it.close()
    rest = {}
    for rank in range(1):
        resumed = ddpio.Loader(paths, batch_size=4, seq_len=12, weights=weights, seed=4, num_replicas=1,
                               rank=rank, arrays="numpy")
        resumed.load_state_dict(state)
        for b in resumed:
            for r, k in enumerate(b["indices"].tolist()):
                rest[k] = (int(b["source"][r]), b["tokens"][r].copy())
    assert not seen & set(rest) and sorted(seen | set(rest)) == sorted(one)
    assert all(rest[k][0] == one[k][0] and np.array_equal(rest[k][1], one[k][1]) for k in rest)
    with pytest.raises(ValueError, match="weights"):
        ddpio.Loader(paths, batch_size=4, seq_len=12, weights=[1.0])
    with pytest.raises(ValueError, match="positive and finite"):
        ddpio.Loader(paths, batch_size=4, seq_len=12, weights=[1.0, -1.0])


def rows(loader_iter):
    return [(tuple(b["indices"].tolist()), b["tokens"].copy()) for b in loader_iter]


def test_two_iterators_and_a_set_epoch_midway_keep_their_own_epochs(token_dataset):
    """Iterators of one loader fill through one core object: each keeps the epoch it started
    with, and their rows are the ones a lone iterator gives."""
    loader = ddpio.Loader(token_dataset, batch_size=4, seq_len=16, seed=1, arrays="numpy")
    alone = rows(iter(loader))
    pairs = list(zip(loader, loader))
    assert [(tuple(a["indices"].tolist()), a["tokens"].tolist()) for a, _ in pairs] == \
        [(i, t.tolist()) for i, t in alone]
    assert all(np.array_equal(a["tokens"], b["tokens"]) for a, b in pairs)
    loader.set_epoch(1)
    epoch1 = rows(iter(loader))
    loader.set_epoch(0)
    it = iter(loader)
    first = next(it)
    loader.set_epoch(1)  # for the next iteration; the running one stays in epoch 0
    rest = [(tuple(first["indices"].tolist()), first["tokens"].copy())] + rows(it)
    assert [t.tolist() for _, t in rest] == [t.tolist() for _, t in alone]
    assert [t.tolist() for _, t in rows(iter(loader))] == [t.tolist() for _, t in epoch1]
    assert [t.tolist() for _, t in epoch1] != [t.tolist() for _, t in alone]


def test_a_saved_state_resumes_only_the_same_datasets(token_dataset, second_dataset):
    a = ddpio.Loader([token_dataset, second_dataset], batch_size=4, seq_len=12, weights=[1, 1])
    state = a.state_dict()
    b = ddpio.Loader([second_dataset, token_dataset], batch_size=4, seq_len=12, weights=[1, 1])
    with pytest.raises(ValueError, match="datasets"):
        b.load_state_dict(state)
    c = ddpio.Loader([token_dataset, second_dataset], batch_size=4, seq_len=12, weights=[1, 1],
                     sequences_per_epoch=50)
    with pytest.raises(ValueError, match="sequences_per_epoch"):
        c.load_state_dict(state)
    ddpio.Loader([token_dataset, second_dataset], batch_size=4, seq_len=12, weights=[1, 1]).load_state_dict(state)


def test_an_epoch_iterated_again_without_set_epoch_warns(token_dataset):
    loader = ddpio.Loader(token_dataset, batch_size=8, seq_len=16, arrays="numpy")
    for _ in loader:
        pass
    with pytest.warns(UserWarning, match="set_epoch"):
        next(iter(loader))
    loader.set_epoch(1)
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        next(iter(loader))
