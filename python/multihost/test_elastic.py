"""The PyTorch example examples/pytorch/train_elastic.py (torch DDP fed by ddpio.Loader, resuming
from the Loader's state_dict) across simulated nodes (network namespaces made and removed by
scripts/sim-cluster.sh; root): a node is lost mid-epoch — every process of it killed after the
link is cut, as in a power loss — and the job finishes on the survivors, restarted by torchrun's
elastic agent (--nnodes 2:3, c10d) or by the script after they exit on their own. The tally of
every rank's trained indices over both attempts must hold: every sample of every epoch exactly
twice (replicate: both members of a group train it), none lost, none repeated. ctest labels
python and multihost."""
import json
import os
import re
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SIM = os.path.join(ROOT, "scripts", "sim-cluster.sh")
TIMEOUT = 30  # the job's --timeout: slow enough for a loaded CI machine


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    if os.geteuid() != 0:
        pytest.skip("multi-host tests need root to make network namespaces (ip netns add); not root here")
    program = os.environ["DDPIO_PROGRAM"]
    work = tmp_path_factory.mktemp("elastic")
    for args in (["synth", "--out", str(work / "src"), "--classes", "3", "--per-class", "20", "--size", "40"],
                 ["convert", "--src", str(work / "src"), "--out", str(work / "db")]):
        subprocess.run([program, *args, "--quiet"], check=True, timeout=300)
    return work / "db"


@pytest.mark.parametrize("agent", ["torchrun", "script"])
def test_a_node_lost_mid_epoch_the_python_job_finishes_with_every_sample_exactly_once(dataset, agent):
    program = os.environ["DDPIO_PROGRAM"]
    p = subprocess.run(
        [SIM, "fault", "--program", "python", "--python-path", os.environ["PYTHONPATH"].split(":")[0],
         "--agent", agent, "--fault", "power", "--data", str(dataset), "--nodes", "3", "--ranks-per-node", "2",
         "--mode", "replicate", "--group-size", "2", "--layout", "strided", "--link-mbit", "0", "--epochs", "3",
         "--batch-size", "4", "--image-size", "16", "--kill-node", "1", "--kill-after-step", "3",
         "--checkpoint-every", "2", "--job-timeout", str(TIMEOUT), "--timeout", "300", "--ddpio", program],
        capture_output=True, text=True, timeout=800)
    assert p.returncode == 0, p.stderr[-4000:] + p.stdout[-2000:]
    j = json.loads(p.stdout.strip().splitlines()[-1])
    assert j["program"] == "python", j
    assert j["tally_ok"], j
    assert (j["samples_lost"], j["samples_repeated"]) == (0, 0), j
    assert [a["world"] for a in j["attempts"]] == [6, 4], f"the survivors, re-formed: {j}"
    assert j["attempts"][1]["step"] >= 2, f"resumed from a checkpoint: {j}"
    if agent == "script":
        assert set(j["survivor_exit_codes"].values()) == {1}, f"the survivors must fail, not hang or pass: {j}"
        # Noticed within the job's --timeout (with the exit's margin), and said why.
        # (with the census's 2.5 heartbeats of a twentieth of the timeout)
        assert j["detection_max_s"] < TIMEOUT * 1.125 + 5, j
        # Naming the peers that vanished (node 1's ranks, by the address they advertised) or, for a
        # rank that timed out after rank 0 had failed and left with the store it serves, saying so.
        named = 0
        for node, error in j["survivor_errors"].items():
            names = "ranks 2, 3 (10.77.0.2) stopped answering" in error
            named += names
            assert "train_elastic.py: rank" in error and (names or "the job's store (" in error), (node, error)
        assert named >= 1, j
        assert len(j["restart_params"]) == 1, f"every rank of the restart ends with the same parameters: {j}"
    else:
        assert j["restarts"] == 1, j
    # The run made its own cluster and removed it.
    namespaces = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert not re.search(r"(^|\n)ds[0-9a-f]{6}-", namespaces), f"a fault run left its cluster: {namespaces}"
