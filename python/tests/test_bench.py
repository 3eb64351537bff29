"""python3 -m ddpio.bench end to end on a tiny dataset: the three contenders each run (torch in a
process of its own) and the report holds what the docs read from it."""
import json
import os
import subprocess
import sys

import pytest


def test_bench_runs_all_three_and_reports_ratios(program, dataset_96px):
    pytest.importorskip("torchvision")  # Debian's python3-torchvision; .ci/run installs it
    images = os.path.join(os.path.dirname(dataset_96px), "images")
    env = dict(os.environ, DDPIO_PROGRAM=program)
    result = subprocess.run([sys.executable, "-m", "ddpio.bench", "--data", str(dataset_96px), "--images", images,
                             "--workers", "1", "--batch-size", "16", "--image-size", "32", "--rounds", "1", "--json"],
                            capture_output=True, text=True, timeout=300, env=env)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["images"] == 99
    for key in ("python", "cpp", "torch", "ceiling"):
        assert report[key]["median"] > 0, key
    assert report["python_vs_torch"] == pytest.approx(report["python"]["median"] / report["torch"]["median"])
    assert "round 1/1" in result.stderr


def test_bench_torch_epoch_failure_is_reported(program, dataset_96px, tmp_path):
    pytest.importorskip("torchvision")
    env = dict(os.environ, DDPIO_PROGRAM=program)
    result = subprocess.run([sys.executable, "-m", "ddpio.bench", "--data", str(dataset_96px), "--images",
                             str(tmp_path / "missing"), "--workers", "1", "--rounds", "1"],
                            capture_output=True, text=True, timeout=300, env=env)
    assert result.returncode != 0
    assert "the torchvision epoch failed" in result.stderr
