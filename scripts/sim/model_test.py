"""The throughput model's arithmetic, on configurations whose answer can be worked out by hand
(4 nodes x 2 ranks, 100 KB records, 1 ms decodes, no read cost unless said)."""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from sim import model, project  # noqa: E402

PARAMS = {"record_bytes": 100e3, "decoded_bytes": 150e3, "decode_s": 1e-3, "read_s": 0.0, "ios_per_record": 1.0}


def cfg(**over):
    c = {"nodes": 4, "ranks_per_node": 2, "link_mbit": 0, "storage_mbps": 0, "storage_iops": 0, "node_mbps": 0,
         "group_size": 1, "mode": "shard", "payload": "encoded", "readers": "leader", "layout": "contiguous",
         "relay": "chain", "image_size": 224}
    c.update(over)
    return c


class ObjectStore(unittest.TestCase):
    # 100 Mbit/s x 0.90 = 11.25 MB/s of 100 KB records: 112.5 fetches/s.
    def test_replicate_leader_fetches_once_per_group_every_member_fetching_g_times(self):
        leader = model.predict(cfg(store="s3", store_link_mbit=100, mode="replicate", group_size=4), PARAMS)
        every = model.predict(cfg(store="s3", store_link_mbit=100, mode="replicate", group_size=4, readers="all"),
                              PARAMS)
        self.assertAlmostEqual(every["bounds"]["store link"], 112.5)
        self.assertAlmostEqual(leader["bounds"]["store link"], 4 * 112.5)
        self.assertEqual(every["limit"], "store link")

    def test_no_page_cache_is_shared_through_a_store(self):
        # On the shared filesystem two members on one node read once; from a store each fetches.
        strided = cfg(store="s3", store_link_mbit=100, mode="replicate", group_size=2, readers="all")
        self.assertAlmostEqual(model.predict(strided, PARAMS)["bounds"]["store link"], 112.5)

    def test_the_exact_order_fetches_whole_chunks_from_half_of_each_on(self):
        # Replicate G=4 on 8 ranks: two streams, a member needs half of each chunk: whole chunks,
        # each member fetching the whole dataset in epoch 1 (2x its records, half the store link).
        fits = dict(PARAMS, dataset_fits=True)
        every = cfg(store="s3", store_link_mbit=100, mode="replicate", group_size=4, readers="all")
        self.assertAlmostEqual(model.exact_chunk_share(every), 0.5)
        self.assertTrue(model.fetches_whole_chunks(every, fits))
        self.assertAlmostEqual(model.predict(every, fits)["bounds"]["store link"], 112.5 / 2)
        self.assertAlmostEqual(model.predict(dict(every, epochs=2), fits)["bounds"]["store link"], 112.5)
        # A GET brings a whole chunk: 83 records of 100 KB in 8 MiB.
        latency = model.predict(dict(every, store_first_byte_ms=30), fits)["bounds"]["store latency"]
        self.assertAlmostEqual(latency, 8 * 16 / 0.030 * 83 / 2)
        # Shard on 8 ranks: an eighth; a node's folder: a quarter. Record by record either way.
        shard = cfg(store="s3", store_link_mbit=100)
        self.assertAlmostEqual(model.exact_chunk_share(shard), 1 / 8)
        self.assertAlmostEqual(model.exact_chunk_share(dict(shard, node_cache=True)), 1 / 4)
        self.assertFalse(model.fetches_whole_chunks(dict(shard, node_cache=True), fits))
        self.assertAlmostEqual(model.predict(shard, fits)["bounds"]["store link"], 112.5)
        # A dataset larger than the budget (or not known to fit), or the block order: no multiplier.
        self.assertFalse(model.fetches_whole_chunks(every, PARAMS))
        self.assertAlmostEqual(model.predict(dict(every, order="block"), fits)["bounds"]["store link"], 112.5)

    def test_the_block_orders_lanes_share_a_chunk_at_their_edges(self):
        # 1,024 records in chunks of 128, 8 lanes of 128: each lane's reader touches ~2 chunks
        # (f = 1 + 8 * 128 / 1024 = 2); a node's folder serves its two adjacent lanes (1 + 4/8).
        p = dict(PARAMS, records=1024)
        block = cfg(store="s3", store_link_mbit=100, order="block")
        self.assertAlmostEqual(model.predict(block, p)["bounds"]["store link"], 112.5 / 2)
        self.assertAlmostEqual(model.predict(dict(block, node_cache=True), p)["bounds"]["store link"], 112.5 / 1.5)
        self.assertAlmostEqual(model.predict(block, PARAMS)["bounds"]["store link"], 112.5)  # size unknown

    def test_request_rate_bound(self):
        params = dict(PARAMS, store_rps=1000)
        p = model.predict(cfg(store="s3", mode="replicate", group_size=4), params)
        self.assertAlmostEqual(p["bounds"]["store requests"], 4000.0)  # each GET worth 4 images
        p = model.predict(cfg(store="s3", mode="shard", group_size=4), params)
        self.assertAlmostEqual(p["bounds"]["store requests"], 1000.0)  # shard: the same fetches for any G
        self.assertNotIn("storage", p["bounds"])


class StoreAtScale(unittest.TestCase):
    """The object store's terms at scale (request rate, records per GET, first-byte latency, a node's
    link), worked by hand."""

    def test_little_bound_is_in_flight_over_the_time_each_request_is_held(self):
        self.assertAlmostEqual(model.little_rate(16, 0.030), 16 / 0.030)  # 533: the 30 ms proxy's bound
        self.assertAlmostEqual(model.little_rate(16, 0.030, 0.010), 400.0)  # the transfer holds it too
        self.assertAlmostEqual(model.little_rate(32, 0.030), 2 * model.little_rate(16, 0.030))

    def test_the_in_flight_window_opens_for_small_gets_only(self):
        self.assertEqual(model.in_flight_window(100e3), 128)  # records: the limit
        self.assertEqual(model.in_flight_window(1 << 20), 64)  # 64 MiB of 1 MiB
        self.assertEqual(model.in_flight_window(8 << 20), 16)  # whole chunks: the floor
        self.assertEqual(model.in_flight_window(100e3, limit=16), 16)  # DDPIO_S3_MAX_IN_FLIGHT=16

    def test_in_flight_needed_inverts_the_bound(self):
        self.assertEqual(model.in_flight_needed(2000, 0.030), 60)  # 2,000/s x 30 ms
        self.assertEqual(model.in_flight_needed(2000, 0.030, 0.0005), 61)  # exactly 61 in flight suffice
        self.assertEqual(model.in_flight_needed(2001, 0.030), 61)

    def test_a_gets_bandwidth_is_its_share_of_the_node_capped_by_its_connection(self):
        self.assertAlmostEqual(model.get_bandwidth(1000.0, 4), 250.0)
        self.assertAlmostEqual(model.get_bandwidth(1000.0, 4, 100.0), 100.0)  # the connection binds
        self.assertAlmostEqual(model.get_bandwidth(1000.0, 4, 400.0), 250.0)  # the share binds

    def test_records_per_get_is_the_chunk_when_it_fits_else_what_the_limit_reaches(self):
        self.assertEqual(model.records_per_get(8 << 20, 110e3), 76)  # 8 MiB of 110 KB records
        self.assertEqual(model.records_per_get(64 << 20, 110e3, chunk_records=128), 128)
        self.assertEqual(model.records_per_get(64 << 20, 110e3, chunk_records=1024), 610)
        self.assertEqual(model.records_per_get(1 << 20, 4 << 20), 1)  # a record larger than the limit

    def test_prefixes_needed(self):
        self.assertEqual(model.prefixes_needed(5500, 5500), 1)
        self.assertEqual(model.prefixes_needed(5501, 5500), 2)
        self.assertEqual(model.prefixes_needed(10, 5500), 1)

    def test_share_of_chunks_a_node_needs(self):
        self.assertAlmostEqual(model.share_of_chunks_needed(76, 1), 1.0)  # one node needs every chunk
        self.assertAlmostEqual(model.share_of_chunks_needed(1, 128), 1 / 128)  # one record a chunk
        # Two nodes, chunks of 2: a chunk is missed only when both records are the other node's.
        self.assertAlmostEqual(model.share_of_chunks_needed(2, 2), 0.75)
        # Epochs draw afresh: two epochs of chunks of 2 are one epoch of chunks of 4.
        self.assertAlmostEqual(model.share_of_chunks_needed(2, 2, epochs=2), model.share_of_chunks_needed(4, 2))

    def test_expected_distinct(self):
        self.assertAlmostEqual(model.expected_distinct(1, 100), 1.0)
        self.assertAlmostEqual(model.expected_distinct(2, 2), 1.5)
        self.assertAlmostEqual(model.expected_distinct(50, 1), 1.0)

    def test_a_block_reader_holds_its_window_or_its_whole_lane_if_shorter(self):
        self.assertEqual(model.block_records_held(20018, 128, 128, 576), 130 * 128 + 576)  # 64 ranks
        self.assertEqual(model.block_records_held(1251, 128, 128, 576), 1251)  # 1,024 ranks

    def test_block_first_chunks(self):
        # The whole lane asked for: every chunk, the last one partial.
        self.assertAlmostEqual(model.block_first_chunks(1000, 100, 4, 1000), 10.0, places=6)
        # A window of one chunk: keys j + u with u < 100, so the first 100 records lie within
        # sqrt(2 * 100 * 100) = 141 places: chunk 0 and nearly surely chunk 1, never chunk 2.
        self.assertAlmostEqual(model.block_first_chunks(10000, 100, 1, 100), 2.0, delta=0.01)
        self.assertEqual(model.block_first_chunks(10000, 100, 1, 1), 1)  # one record: one chunk
        # A lane far shorter than the window is shuffled whole, every record equally likely to be
        # early: a batch of 64 of 1,280 records touches each chunk of 128 with 1 - (1 - 64/1280)^128.
        self.assertAlmostEqual(model.block_first_chunks(1280, 128, 100000, 64), 10 * (1 - (1 - 64 / 1280) ** 128),
                               delta=0.001)
        # A long lane: the first 64 records lie within sqrt(2 * 64 * 512) = 256 places, two chunks.
        self.assertAlmostEqual(model.block_first_chunks(4500, 128, 4, 64), 2.0, delta=0.01)


class StoreBounds(unittest.TestCase):
    S3 = {"store": "s3", "readers": "leader"}

    def test_little_bound_scales_with_fetchers_and_records_per_get(self):
        every = model.predict(cfg(**self.S3, store_first_byte_ms=30), PARAMS)["bounds"]["store latency"]
        self.assertAlmostEqual(every, 8 * 128 / 0.030)  # 8 ranks each fetching its own, window open
        lead = model.predict(cfg(**self.S3, store_first_byte_ms=30, mode="replicate", group_size=4),
                             PARAMS)["bounds"]["store latency"]
        self.assertAlmostEqual(lead, 2 * 128 / 0.030 * 4)  # 2 leaders, each GET worth 4 images
        chunks = model.predict(cfg(**self.S3, store_first_byte_ms=30),
                               dict(PARAMS, records_per_request=128, store_get_bytes_per_s=128 * 100e3 / 0.010,
                                    store_in_flight=4))["bounds"]["store latency"]
        self.assertAlmostEqual(chunks, 8 * 4 * 128 / 0.040)  # 30 ms + 10 ms to move 128 records

    def test_request_rate_per_prefix(self):
        p = model.predict(cfg(**self.S3), dict(PARAMS, store_rps_per_prefix=5500, store_prefixes=3,
                                                records_per_request=128))
        self.assertAlmostEqual(p["bounds"]["store requests"], 3 * 5500 * 128)
        p = model.predict(cfg(**self.S3), dict(PARAMS, store_rps=1000, store_rps_per_prefix=5500))
        self.assertAlmostEqual(p["bounds"]["store requests"], 1000)  # a measured gateway's rate wins

    def test_node_link_counts_the_records_each_node_fetches(self):
        # 100 Mbit/s = 12.5 MB/s of 100 KB records: 125 records/s a node.
        p = model.predict(cfg(**self.S3, store_node_mbit=100), PARAMS)
        self.assertAlmostEqual(p["bounds"]["node link"], 4 * 125)  # each node fetches a quarter
        strided = model.predict(cfg(**self.S3, store_node_mbit=100, group_size=4, layout="strided"), PARAMS)
        self.assertAlmostEqual(strided["bounds"]["node link"], 125)  # both leaders on node 0: all of it
        self.assertNotIn("node link", model.predict(cfg(**self.S3), PARAMS)["bounds"])


class Projection(unittest.TestCase):
    """scripts/sim/project.py: the three strategies on jobs small enough to work by hand."""

    def rows(self, *flags):
        _, rows = project.project(project.parse_args(list(flags)))
        return {r["strategy"]: r for r in rows}

    def test_per_record_asks_one_get_per_image_at_the_jobs_rate(self):
        r = self.rows("--nodes", "2", "--gpus-per-node", "4", "--images-per-s-per-gpu", "1000")["per-record exact"]
        self.assertAlmostEqual(r["gets_per_s"], 8000)
        self.assertEqual(r["prefixes_needed"], 2)

    def test_one_node_fetches_each_whole_chunk_once(self):
        r = self.rows("--nodes", "1", "--records", "7600", "--record-kb", "110")["chunked exact"]
        self.assertAlmostEqual(r["gets_epoch1"], 100)  # 76 records of 110 KB in 8 MiB
        self.assertAlmostEqual(r["records_per_get"], 76)
        self.assertAlmostEqual(r["gets_by_epoch"][2], 0)  # the second epoch comes from the folder

    def test_block_fetches_each_chunk_once_and_node_edges_twice(self):
        r = self.rows("--nodes", "4", "--records", "128000")["chunked block"]
        self.assertAlmostEqual(r["gets_epoch1"], 1000 + 3)

    def test_more_prefixes_lift_only_the_request_bound(self):
        one = self.rows()["chunked block"]
        four = self.rows("--prefixes", "4")["chunked block"]
        self.assertEqual(one["epoch1_bound"], "requests")
        self.assertEqual(four["epoch1_bound"], "the GPUs")
        self.assertEqual(one["gets_per_s"], four["gets_per_s"])


class DocumentedFigures(unittest.TestCase):
    def test_the_model_holds_within_20_percent_of_what_performance_md_measured(self):
        for what, measured, predicted, _ in project.checks():
            with self.subTest(what):
                self.assertLessEqual(abs(measured / predicted - 1), 0.2)


class Groups(unittest.TestCase):
    def test_layouts(self):
        self.assertEqual(model.groups(8, 4, "contiguous"), [[0, 1, 2, 3], [4, 5, 6, 7]])
        self.assertEqual(model.groups(8, 4, "strided"), [[0, 2, 4, 6], [1, 3, 5, 7]])


class Storage(unittest.TestCase):
    def test_shard_reads_the_same_bytes_for_every_group_size(self):
        for g in (1, 2, 4, 8):
            p = model.predict(cfg(group_size=g, storage_mbps=25), PARAMS)
            self.assertAlmostEqual(p["bounds"]["storage"], 250.0)

    def test_replicate_leader_reads_once_per_group(self):
        p = model.predict(cfg(mode="replicate", group_size=4, layout="strided", storage_mbps=25), PARAMS)
        self.assertAlmostEqual(p["bounds"]["storage"], 1000.0)

    def test_every_member_reading_shares_only_a_nodes_page_cache(self):
        strided = model.predict(cfg(mode="replicate", group_size=2, layout="strided", readers="all",
                                    storage_mbps=25), PARAMS)
        self.assertAlmostEqual(strided["bounds"]["storage"], 250.0)  # members on different nodes
        local = model.predict(cfg(mode="replicate", group_size=2, readers="all", storage_mbps=25), PARAMS)
        self.assertAlmostEqual(local["bounds"]["storage"], 500.0)  # both members on one node: read once

    def test_a_node_cap_halves_shard_when_groups_span_two_nodes(self):
        one = model.predict(cfg(group_size=2, node_mbps=10), PARAMS)["bounds"]["node cap"]
        two = model.predict(cfg(group_size=4, node_mbps=10), PARAMS)["bounds"]["node cap"]
        self.assertAlmostEqual(one, 400.0)  # every node reads its 1/4 of the images
        self.assertAlmostEqual(two, 200.0)  # two nodes read everything


class Network(unittest.TestCase):
    def test_chain_carries_the_stream_once_per_link_star_g_minus_one_times(self):
        link = 800  # Mbit/s: 100 MB/s before efficiency
        chain = model.predict(cfg(mode="replicate", group_size=4, layout="strided", link_mbit=link), PARAMS)
        star = model.predict(cfg(mode="replicate", group_size=4, layout="strided", link_mbit=link, relay="star"),
                             PARAMS)
        # Per delivered image each of a group's 4 members receives 1/8 of the images: the chain
        # sends 1/8 image per hop out of each node, the star 3/8 out of the leader's node (two
        # groups, leaders on node 0 both).
        eff = model.LINK_EFFICIENCY
        self.assertAlmostEqual(chain["bounds"]["network"], 100e6 * eff / (100e3 * 2 / 8))
        self.assertAlmostEqual(star["bounds"]["network"], 100e6 * eff / (100e3 * 2 * 3 / 8))

    def test_groups_inside_a_node_use_no_link(self):
        p = model.predict(cfg(group_size=2, link_mbit=100), PARAMS)
        self.assertNotIn("network", p["bounds"])


class Cpu(unittest.TestCase):
    def test_decoded_replicate_decodes_once_per_group(self):
        enc = model.predict(cfg(mode="replicate", group_size=4, layout="strided"), PARAMS)
        dec = model.predict(cfg(mode="replicate", group_size=4, layout="strided", payload="decoded"), PARAMS)
        self.assertAlmostEqual(enc["bounds"]["cpu"], 1000.0)
        self.assertAlmostEqual(dec["bounds"]["cpu"], 4000.0)

    def test_reads_cost_cpu_by_the_records_read(self):
        params = dict(PARAMS, read_s=1e-3)
        self.assertAlmostEqual(model.predict(cfg(), params)["bounds"]["cpu"], 500.0)
        rep = model.predict(cfg(mode="replicate", group_size=4, layout="strided"), params)
        self.assertAlmostEqual(rep["bounds"]["cpu"], 1.0 / (1e-3 + 1e-3 / 4))

    def test_cpu_work_counts_gets_by_how_records_come(self):
        params = dict(PARAMS, records=1000, dataset_fits=True, gets_per_record=0.8)
        store = dict(store="s3", mode="replicate", group_size=4, layout="strided")
        # A member needs half of each chunk: whole chunks, 83 records of 100 KB to a GET of 8 MiB.
        every = model.cpu_work(cfg(readers="all", **store), params)
        self.assertAlmostEqual(every["records"], 2.0)
        self.assertAlmostEqual(every["gets"], 2.0 / 83)
        one = model.cpu_work(cfg(readers="all", whole_chunks=False, **store), params)
        self.assertAlmostEqual(one["records"], 1.0)
        self.assertAlmostEqual(one["gets"], 0.8)
        block = model.cpu_work(cfg(store="s3", order="block"), params)
        self.assertAlmostEqual(block["gets"], block["records"] / 128)

    def test_cpu_work_counts_every_hop_of_the_relay(self):
        enc = model.cpu_work(cfg(mode="replicate", group_size=4, layout="strided"), PARAMS)
        dec = model.cpu_work(cfg(mode="replicate", group_size=4, layout="strided", payload="decoded"), PARAMS)
        # The chain's three hops per group, each carrying 1/8 of the delivered images.
        self.assertAlmostEqual(enc["relay_bytes"], 0.75 * 100e3)
        self.assertAlmostEqual(dec["relay_bytes"], 0.75 * 150e3)
        self.assertAlmostEqual(dec["decodes"], 0.25)
        self.assertAlmostEqual(model.cpu_work(cfg(), PARAMS)["relay_bytes"], 0.0)

    def test_calibration_recovers_the_prices_of_the_work(self):
        truth = {"decode_s": 6e-4, "read_s": 3e-4, "get_s": 4e-4, "relay_byte_s": 2e-9}
        work = [dict(decodes=1, records=2, gets=0.07, relay_bytes=0),
                dict(decodes=1, records=0.5, gets=0.02, relay_bytes=72e3),
                dict(decodes=0.25, records=0.5, gets=0.02, relay_bytes=112e3),
                dict(decodes=1, records=1, gets=0.9, relay_bytes=0)]
        got = model.calibrate_cpu([(w, 1.0 / model.cpu_seconds(w, truth)) for w in work])
        for key, value in truth.items():
            self.assertAlmostEqual(got[key] / value, 1.0, places=6)

    def test_calibration_never_prices_work_below_zero(self):
        # The relayed runs ran faster than decoding alone allows: the relay's price would be
        # negative, so it is 0 and the rest fit without it.
        work = [dict(decodes=1, records=1, gets=1, relay_bytes=0),
                dict(decodes=1, records=0.25, gets=0.25, relay_bytes=75e3),
                dict(decodes=1, records=0.5, gets=0.5, relay_bytes=50e3)]
        rates = [500.0, 1100.0, 900.0]
        got = model.calibrate_cpu(list(zip(work, rates)))
        self.assertTrue(all(v >= 0 for v in got.values()))
        self.assertEqual(got["relay_byte_s"], 0.0)
        fit = [1.0 / model.cpu_seconds(w, got) for w in work]
        for f, r in zip(fit, rates):
            self.assertLess(abs(f / r - 1), 0.1)

    def test_whole_chunks_of_the_exact_order_fetch_then_decode(self):
        # Every member needs half of each chunk: whole chunks, the dataset (1,000 records of 100 KB)
        # twice over per member's share in epoch 1: 11.25 MB/s gives 56.25 images/s of fetching,
        # then each image's 1 ms decode; epoch 2 fetches nothing and decodes after epoch 1's.
        params = dict(PARAMS, records=1000, dataset_fits=True)
        c = cfg(store="s3", store_link_mbit=100, mode="replicate", group_size=4, layout="strided", readers="all")
        one = model.predict(c, params)
        self.assertEqual(one["limit"], "fetch, then decode")
        self.assertAlmostEqual(one["images_per_s"], 1.0 / (1 / 56.25 + 1e-3))
        two = model.predict(dict(c, epochs=2), params)
        self.assertAlmostEqual(two["images_per_s"], 2.0 / (1 / 56.25 + 2e-3))
        # Record by record the fetch streams beside the decode: the smaller bound.
        self.assertEqual(model.predict(dict(c, whole_chunks=False), params)["limit"], "store link")

    def test_the_block_order_streams_its_chunks(self):
        params = dict(PARAMS, records=1000, dataset_fits=True)
        c = cfg(store="s3", store_link_mbit=100, order="block", node_cache=True, epochs=2)
        self.assertFalse(model.front_loaded(c, params))
        p = model.predict(c, params)
        self.assertEqual(p["limit"], "store link")
        self.assertNotIn("fetch, then decode", p["bounds"])

    def test_all_the_cpu_time_is_a_floor_under_fetch_then_decode(self):
        params = dict(PARAMS, records=1000, dataset_fits=True, read_s=2e-3)
        c = cfg(store="s3", mode="replicate", group_size=4, layout="strided", readers="all")
        p = model.predict(c, params)  # no store link: nothing but the CPU, 1 + 2 x 2 ms an image
        self.assertAlmostEqual(p["bounds"]["fetch, then decode"], 200.0)

    def test_the_start_up_comes_before_the_runs_images(self):
        params = dict(PARAMS, records=1000, start_s=0.5)
        p = model.predict(cfg(), params)  # CPU: 1,000 images/s; 1,000 images in 1 s after 0.5 s
        self.assertAlmostEqual(p["bounds"]["cpu"], 1000.0)
        self.assertAlmostEqual(p["images_per_s"], 1000.0 / 1.5)
        rep = model.predict(cfg(mode="replicate", group_size=4, layout="strided", epochs=2), params)
        self.assertAlmostEqual(rep["images_per_s"], 8000.0 / (8.0 + 0.5))

    def test_the_smallest_bound_wins(self):
        p = model.predict(cfg(storage_mbps=25, link_mbit=1000, group_size=4), PARAMS)
        self.assertEqual(p["limit"], "storage")
        self.assertAlmostEqual(p["images_per_s"], 250.0)


if __name__ == "__main__":
    unittest.main()
