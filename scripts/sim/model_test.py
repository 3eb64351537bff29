"""The throughput model's arithmetic, on configurations whose answer can be worked out by hand
(4 nodes x 2 ranks, 100 KB records, 1 ms decodes, no read cost unless said)."""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from sim import model  # noqa: E402

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

    def test_request_rate_bound(self):
        params = dict(PARAMS, store_rps=1000)
        p = model.predict(cfg(store="s3", mode="replicate", group_size=4), params)
        self.assertAlmostEqual(p["bounds"]["store requests"], 4000.0)  # each GET worth 4 images
        p = model.predict(cfg(store="s3", mode="shard", group_size=4), params)
        self.assertAlmostEqual(p["bounds"]["store requests"], 1000.0)  # shard: the same fetches for any G
        self.assertNotIn("storage", p["bounds"])


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

    def test_the_smallest_bound_wins(self):
        p = model.predict(cfg(storage_mbps=25, link_mbit=1000, group_size=4), PARAMS)
        self.assertEqual(p["limit"], "storage")
        self.assertAlmostEqual(p["images_per_s"], 250.0)


if __name__ == "__main__":
    unittest.main()
