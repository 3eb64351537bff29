"""examples/pytorch/train_elastic.py on one host under `ddpio launch` (2 ranks, loopback): a run
stopped by nothing finishes and a second start finds it done (its checkpoint is the end);
a start with other settings refuses the checkpoint, naming the setting; the index log of the
run tallies every sample exactly once."""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLE = os.path.join(ROOT, "examples", "pytorch", "train_elastic.py")
TALLY = os.path.join(ROOT, "scripts", "tally-indices.py")


def launch(program, tmp_path, *args):
    env = dict(os.environ, PYTHONPATH=os.environ["PYTHONPATH"])
    return subprocess.run([os.path.abspath(program), "launch", "--nproc-per-node", "2", "--", sys.executable, EXAMPLE, *args],
                          capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)


def test_the_elastic_example_resumes_its_own_checkpoint_and_refuses_another_runs(program, dataset, tmp_path):
    ck = tmp_path / "ck"
    common = ["--data", str(dataset), "--epochs", "2", "--image-size", "16", "--checkpoint-dir", str(ck),
              "--checkpoint-every", "2", "--indices-out", str(ck / "idx"), "--timeout", "60"]
    first = launch(program, tmp_path, *common, "--batch-size", "4")
    assert first.returncode == 0, first.stderr[-3000:]
    assert (ck / "checkpoint.pt").exists() and not [p for p in os.listdir(ck) if ".tmp." in p]
    again = launch(program, tmp_path, *common, "--batch-size", "4")
    assert again.returncode == 0, again.stderr[-3000:]
    assert "(resumed)" in again.stdout, again.stdout
    other = launch(program, tmp_path, *common, "--batch-size", "8")
    assert other.returncode != 0
    assert "was written by another run (batch_size: the checkpoint's 4, this run's 8)" in other.stderr, \
        other.stderr[-2000:]
    tally = subprocess.run([sys.executable, TALLY, str(ck / "idx"), "--samples", "21", "--epochs", "2"],
                           capture_output=True, text=True)
    assert tally.returncode == 0, tally.stdout + tally.stderr
    assert "every sample of every epoch exactly once" in tally.stdout
