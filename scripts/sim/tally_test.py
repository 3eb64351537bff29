#!/usr/bin/env python3
"""Tests of scripts/tally-indices.py on index logs written by hand: what a restart redoes is
dropped, and a sample lost or trained twice is found (ctest: tally_indices_test)."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

TALLY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tally-indices.py")


def run(prefix, samples, epochs):
    p = subprocess.run([sys.executable, TALLY, prefix, "--samples", str(samples), "--epochs",
                        str(epochs), "--json"], capture_output=True, text=True, check=False)
    return p.returncode, (json.loads(p.stdout) if p.stdout.strip() else None), p.stderr


class Tally(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.prefix = os.path.join(self.dir.name, "idx")

    def tearDown(self):
        self.dir.cleanup()

    def write(self, rank, lines, tail=""):
        with open(f"{self.prefix}.rank{rank}.txt", "a", encoding="ascii") as f:
            f.write("".join(line + "\n" for line in lines) + tail)

    @staticmethod
    def step(t, epoch, step, indices):
        return f"step {t} epoch {epoch} step {step} {len(indices)} " + " ".join(map(str, indices))

    def test_steps_after_the_checkpoint_a_restart_resumed_from_are_redone_not_repeated(self):
        # 8 samples, 2 ranks, 2 per step: 2 steps an epoch. Attempt 1 takes steps 1-3 and dies;
        # the checkpoint was at step 2, so the restart (world 1) redoes step 3's samples.
        self.write(0, ["start 100 attempt 1 world 2 rank 0 epoch 0 step 0", self.step(110, 0, 1, [0, 1]),
                       self.step(120, 0, 2, [2, 3]), self.step(130, 1, 3, [7, 6])])
        self.write(1, ["start 101 attempt 1 world 2 rank 1 epoch 0 step 0", self.step(111, 0, 1, [4, 5]),
                       self.step(121, 0, 2, [6, 7])], tail="step 131 epoch 1 step 3 2 5")
        self.write(0, ["start 200 attempt 2 world 1 rank 0 epoch 1 step 2",
                       self.step(210, 1, 3, [7, 6, 5, 4]), self.step(220, 1, 4, [3, 2, 1, 0])])
        code, r, err = run(self.prefix, 8, 2)
        self.assertEqual(code, 0, err)
        self.assertTrue(r["ok"])
        self.assertEqual(r["redone_steps"], 1)
        self.assertEqual(r["redone_step_lines"], 1)  # rank 1's cut line is not a step taken
        self.assertEqual([a["world"] for a in r["attempts"]], [2, 1])
        self.assertEqual([e["trained"] for e in r["epochs"]], [8, 8])

    def test_a_rank_that_starts_late_does_not_make_the_others_steps_redone(self):
        # Rank 1 logs step 1 before rank 0 has written its start line (lines are written as
        # each rank gets there): the same attempt, so nothing is redone.
        self.write(0, ["start 150 attempt 1 world 2 rank 0 epoch 0 step 0", self.step(160, 0, 1, [0, 1])])
        self.write(1, ["start 101 attempt 1 world 2 rank 1 epoch 0 step 0", self.step(110, 0, 1, [2, 3])])
        code, r, err = run(self.prefix, 4, 1)
        self.assertEqual(code, 0, err)
        self.assertEqual(r["redone_steps"], 0)
        self.assertEqual(len(r["attempts"]), 1)

    def test_a_lost_and_a_repeated_sample_are_found_and_named(self):
        self.write(0, ["start 100 attempt 1 world 1 rank 0 epoch 0 step 0", self.step(110, 0, 1, [0, 1]),
                       self.step(120, 0, 2, [2, 2])])
        code, r, _ = run(self.prefix, 4, 1)
        self.assertEqual(code, 1)
        self.assertFalse(r["ok"])
        self.assertEqual(r["epochs"][0]["missing_first"], [3])
        self.assertEqual(r["epochs"][0]["repeated_first"], [2])

    def test_a_restart_that_skips_steps_loses_their_samples(self):
        # Resuming at step 2 when step 2 was never taken: its samples are lost, and said so.
        self.write(0, ["start 100 attempt 1 world 1 rank 0 epoch 0 step 0", self.step(110, 0, 1, [0, 1]),
                       "start 200 attempt 2 world 1 rank 0 epoch 0 step 2", self.step(210, 0, 3, [4, 5])])
        code, r, _ = run(self.prefix, 6, 1)
        self.assertEqual(code, 1)
        self.assertEqual(r["epochs"][0]["missing_first"], [2, 3])

    def test_replicate_mode_wants_every_sample_once_per_member(self):
        for rank in (0, 1):  # one group of 2: both members train the group's samples
            self.write(rank, [f"start 10{rank} attempt 1 world 2 rank {rank} replicas 2 epoch 0 step 0",
                              self.step(110, 0, 1, [0, 1]), self.step(120, 0, 2, [2, 3])])
        code, r, err = run(self.prefix, 4, 1)
        self.assertEqual(code, 0, err)
        self.assertEqual(r["replicas"], 2)
        self.write(1, [self.step(130, 0, 3, [3])])  # a third time
        code, r, _ = run(self.prefix, 4, 1)
        self.assertEqual(code, 1)
        self.assertEqual(r["epochs"][0]["repeated_first"], [3])

    def test_no_files_and_a_malformed_line_are_usage_errors(self):
        code, _, err = run(self.prefix, 4, 1)
        self.assertEqual(code, 2)
        self.assertIn("no ", err)
        self.write(0, ["start 100 attempt 1 world 1 rank 0 epoch 0 step 0", "step 110 epoch 0 step 1 3 0 1"])
        code, _, err = run(self.prefix, 4, 1)
        self.assertEqual(code, 2)
        self.assertIn("rank0.txt:2", err)


if __name__ == "__main__":
    unittest.main()
