"""A simulated cluster on one machine: network namespaces joined by a bridge, shaped links, and a
shared, throttled "parallel filesystem".

Layout of a cluster named NAME with N nodes:
  NAME-sw            the switch: a namespace holding bridge br0 and one port pI per node
  NAME-nI            node I: a namespace whose eth0 (10.77.0.(I+1)/24) is a veth to port pI
  links              `tc tbf` on both ends of every veth (eth0 egress = the node's uplink,
                     pI egress = its downlink), so each node gets LINK Mbit/s each way
  storage            an ext4 image holding the dataset on a read-only loop device (the shared
                     filesystem), throttled as a whole by a blkio v1 cgroup (MB/s and IOPS); each
                     node mounts it through its own read-only loop device stacked on it (a private
                     page cache, as a node of a parallel filesystem has), optionally capped per
                     node (a client limit)
  store (--store s3) NAME-st: a namespace of its own on the switch (10.77.0.250, port ps) running
                     Ceph's RADOS Gateway (scripts/object-store.sh up --listen), the dataset
                     uploaded to s3://ddpio-sim/data; its link is shaped with tbf as the nodes'
                     are (both ends), so the store's bandwidth is its link, as for an object
                     store across a network (netem is missing here: no added latency, unless
                     --store-first-byte-ms puts delay_proxy.py in front of the gateway)
  cgroups            ranks run in the cluster's blkio cgroup (the aggregate limit applies to them;
                     v1 limits of a parent do not reach child cgroups, so there is one for all)
                     and, with a CPU cap, in one cpu cgroup per node

Every resource is written to /run/ddpio-sim/NAME/state.json the moment it exists, so `down`
(and the `finally` of every command) removes exactly what was made, in reverse order, even
after a crash or Ctrl-C. Needs root.
"""
import json
import os
import re
import shutil
import subprocess
import time

STATE_ROOT = "/run/ddpio-sim"
CGROUP_ROOT = "/sys/fs/cgroup"
SUBNET = "10.77.0"
# tbf needs a burst of at least rate/HZ; 512 kB holds 91-95 % of the rate up to 2 Gbit/s here.
TBF_BURST = "512kb"
TBF_LATENCY = "5ms"
STORE_ADDRESS = f"{SUBNET}.250"
STORE_PORT = 7480
DELAY_PROXY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "delay_proxy.py")
STORE_URL = "s3://ddpio-sim/data"
OBJECT_STORE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "object-store.sh")


class SimError(Exception):
    pass


def sh(*argv, check=True, capture=True, input=None):
    """Runs a command; SimError with its stderr when it fails and `check`."""
    p = subprocess.run([str(a) for a in argv], capture_output=capture, text=True, input=input)
    if check and p.returncode != 0:
        raise SimError(f"{' '.join(map(str, argv))}: exit {p.returncode}: {(p.stderr or '').strip()}")
    return p


def need_root():
    if os.geteuid() != 0:
        raise SimError("the cluster simulator needs root (network namespaces, loop devices, cgroups)")
    for tool in ("ip", "tc", "losetup", "mkfs.ext4", "nsenter", "mount"):
        if shutil.which(tool) is None:
            raise SimError(f"{tool} not found: run scripts/install-deps.sh (iproute2, util-linux, e2fsprogs)")
    if not os.path.isdir(f"{CGROUP_ROOT}/blkio"):
        raise SimError(f"no blkio cgroup (v1) at {CGROUP_ROOT}/blkio: storage cannot be throttled here")


def dev_of(path):
    """'MAJ:MIN' of a block device."""
    st = os.stat(path)
    return f"{os.major(st.st_rdev)}:{os.minor(st.st_rdev)}"


class Cluster:
    def __init__(self, name):
        if not re.fullmatch(r"[a-z][a-z0-9]{1,9}", name):
            raise SimError(f"cluster name '{name}': 2-10 lower-case letters and digits, starting with a letter")
        self.name = name
        self.dir = f"{STATE_ROOT}/{name}"
        self.state = {"name": name, "nodes": 0, "resources": [], "storage": None, "links_mbit": 0}

    # ----- state -------------------------------------------------------------------------
    @classmethod
    def load(cls, name):
        c = cls(name)
        path = f"{c.dir}/state.json"
        if not os.path.exists(path):
            raise SimError(f"no cluster named {name} ({path} missing)")
        with open(path) as f:
            c.state = json.load(f)
        return c

    def save(self):
        os.makedirs(self.dir, exist_ok=True)
        tmp = f"{self.dir}/state.json.tmp"
        with open(tmp, "w") as f:
            json.dump(self.state, f, indent=1)
        os.replace(tmp, f"{self.dir}/state.json")

    def made(self, kind, **what):
        """Records a resource the moment it exists (teardown goes in reverse order)."""
        self.state["resources"].append(dict(kind=kind, **what))
        self.save()

    @property
    def nodes(self):
        return self.state["nodes"]

    def ns(self, i):
        return f"{self.name}-n{i}"

    @property
    def switch(self):
        return f"{self.name}-sw"

    def address(self, i):
        return f"{SUBNET}.{i + 1}"

    def data_path(self, i):
        """Where node i sees the dataset: its mount of the shared filesystem, or the store's URL."""
        if self.store_kind == "s3":
            return self.state["store"]["url"]
        s = self.state["storage"]
        return f"{s['mounts'][i]}/data" if s else None

    @property
    def store_kind(self):
        """'s3' (an object store), 'fs' (the shared filesystem) or None (no dataset)."""
        if self.state.get("store"):
            return "s3"
        return "fs" if self.state.get("storage") else None

    def job_env(self):
        """Environment every rank needs: the store's endpoint and keys (no local cache: every
        epoch reads from the store, as a first run does)."""
        if self.store_kind != "s3":
            return {}
        return dict(self.state["store"]["env"], DDPIO_S3_CACHE_DIR="")

    # ----- network -----------------------------------------------------------------------
    def up_network(self, nodes):
        self.state["nodes"] = nodes
        self.save()
        sh("ip", "netns", "add", self.switch)
        self.made("netns", name=self.switch)
        sh("ip", "-n", self.switch, "link", "set", "lo", "up")
        sh("ip", "-n", self.switch, "link", "add", "br0", "type", "bridge")
        sh("ip", "-n", self.switch, "link", "set", "br0", "up")
        for i in range(nodes):
            ns = self.ns(i)
            sh("ip", "netns", "add", ns)
            self.made("netns", name=ns)
            sh("ip", "-n", ns, "link", "set", "lo", "up")
            a, b = f"{self.name}a{i}", f"{self.name}b{i}"  # <= 15 characters
            sh("ip", "link", "add", a, "type", "veth", "peer", "name", b)
            self.made("link", name=a)  # deleting one end deletes the pair, wherever it is
            sh("ip", "link", "set", a, "netns", ns)
            sh("ip", "link", "set", b, "netns", self.switch)
            sh("ip", "-n", ns, "link", "set", a, "name", "eth0")
            sh("ip", "-n", self.switch, "link", "set", b, "name", f"p{i}")
            sh("ip", "-n", ns, "addr", "add", f"{self.address(i)}/24", "dev", "eth0")
            sh("ip", "-n", ns, "link", "set", "eth0", "up")
            sh("ip", "-n", self.switch, "link", "set", f"p{i}", "master", "br0")
            sh("ip", "-n", self.switch, "link", "set", f"p{i}", "up")

    def shape(self, mbit):
        """LINK Mbit/s each way on every node's link (0: unshaped)."""
        for i in range(self.nodes):
            for ns, dev in ((self.ns(i), "eth0"), (self.switch, f"p{i}")):
                if mbit > 0:
                    sh("ip", "netns", "exec", ns, "tc", "qdisc", "replace", "dev", dev, "root", "tbf", "rate",
                       f"{mbit}mbit", "burst", TBF_BURST, "latency", TBF_LATENCY)
                else:
                    sh("ip", "netns", "exec", ns, "tc", "qdisc", "del", "dev", dev, "root", check=False)
        self.state["links_mbit"] = mbit
        self.save()

    def link_bytes(self):
        """{node: (tx, rx)} bytes of each node's eth0 so far."""
        out = {}
        for i in range(self.nodes):
            p = sh("ip", "-n", self.ns(i), "-s", "-j", "link", "show", "eth0")
            st = json.loads(p.stdout)[0]["stats64"]
            out[i] = (st["tx"]["bytes"], st["rx"]["bytes"])
        return out

    # ----- object store ------------------------------------------------------------------
    def up_store_s3(self, data, ddpio, first_byte_ms=0):
        """The gateway in namespace NAME-st behind its own link, with `data` uploaded to it; with
        first_byte_ms > 0 the ranks reach it through delay_proxy.py (in the same namespace, port
        STORE_PORT + 1), which holds each response's first byte until that long after its request:
        a real object store's first-byte latency, which netem would add if it were here."""
        data = os.path.abspath(data)
        if not os.path.exists(data):
            raise SimError(f"dataset {data} does not exist")
        ns = f"{self.name}-st"
        sh("ip", "netns", "add", ns)
        self.made("netns", name=ns)
        sh("ip", "-n", ns, "link", "set", "lo", "up")
        a, b = f"{self.name}as", f"{self.name}bs"
        sh("ip", "link", "add", a, "type", "veth", "peer", "name", b)
        self.made("link", name=a)
        sh("ip", "link", "set", a, "netns", ns)
        sh("ip", "link", "set", b, "netns", self.switch)
        sh("ip", "-n", ns, "link", "set", a, "name", "eth0")
        sh("ip", "-n", self.switch, "link", "set", b, "name", "ps")
        sh("ip", "-n", ns, "addr", "add", f"{STORE_ADDRESS}/24", "dev", "eth0")
        sh("ip", "-n", ns, "link", "set", "eth0", "up")
        sh("ip", "-n", self.switch, "link", "set", "ps", "master", "br0")
        sh("ip", "-n", self.switch, "link", "set", "ps", "up")
        state_dir = f"/tmp/ddpio-sim-{self.name}-s3"
        self.made("s3", dir=state_dir)
        size_mb = max(1024, int(_bytes_of(data) * 2.5 / 2**20) + 256)  # memstore: ~2x what it holds
        p = sh("ip", "netns", "exec", ns, OBJECT_STORE, "up", "--dir", state_dir, "--listen", STORE_ADDRESS,
               "--port", STORE_PORT, "--size-mb", size_mb)
        env = {}
        for line in p.stdout.splitlines():
            m = re.fullmatch(r"export (\w+)=(\S*)", line.strip())
            if m:
                env[m.group(1)] = m.group(2).strip("'\"")
        if "AWS_ENDPOINT_URL" not in env:
            raise SimError(f"object-store.sh up printed no endpoint: {p.stdout.strip()} {p.stderr.strip()}")
        self.state["store"] = {"ns": ns, "dir": state_dir, "url": STORE_URL, "env": env, "link_mbit": 0,
                               "bytes": _bytes_of(data)}
        self.save()
        sh("ip", "netns", "exec", ns, "env", *[f"{k}={v}" for k, v in env.items()], ddpio, "upload", data, STORE_URL,
           "--create-bucket")
        if first_byte_ms > 0:
            # Killed with the namespace at teardown (kill_netns), like the gateway's daemons.
            proxy = subprocess.Popen(
                ["ip", "netns", "exec", ns, "/usr/bin/python3", DELAY_PROXY, "--listen",
                 f"{STORE_ADDRESS}:{STORE_PORT + 1}", "--upstream", f"{STORE_ADDRESS}:{STORE_PORT}",
                 "--delay-ms", str(first_byte_ms)],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            line = proxy.stdout.readline().strip()
            if not line.startswith("listening "):
                proxy.kill()
                raise SimError(f"delay_proxy.py did not start: {line} {proxy.stderr.read().strip()}")
            endpoint = f"http://{STORE_ADDRESS}:{STORE_PORT + 1}"
            for k in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"):
                if k in env:
                    env[k] = endpoint
            self.state["store"].update(env=env, first_byte_ms=first_byte_ms)
            self.save()

    def shape_store(self, mbit):
        """The store's link: MBIT Mbit/s each way (0: unshaped), tbf on both ends as shape()."""
        st = self.state["store"]
        for ns, dev in ((st["ns"], "eth0"), (self.switch, "ps")):
            if mbit > 0:
                sh("ip", "netns", "exec", ns, "tc", "qdisc", "replace", "dev", dev, "root", "tbf", "rate",
                   f"{mbit}mbit", "burst", TBF_BURST, "latency", TBF_LATENCY)
            else:
                sh("ip", "netns", "exec", ns, "tc", "qdisc", "del", "dev", dev, "root", check=False)
        st.update(link_mbit=mbit)
        self.save()

    def store_bytes_sent(self):
        """Bytes the store has sent over its link so far (responses: what the ranks read)."""
        p = sh("ip", "-n", self.state["store"]["ns"], "-s", "-j", "link", "show", "eth0")
        return json.loads(p.stdout)[0]["stats64"]["tx"]["bytes"]

    # ----- storage -----------------------------------------------------------------------
    def up_storage(self, data, workdir):
        """Copies the dataset at `data` into a filesystem image every node mounts read-only."""
        data = os.path.abspath(data)
        if not os.path.exists(data):
            raise SimError(f"dataset {data} does not exist")
        size = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(data) for f in fs) \
            if os.path.isdir(data) else os.path.getsize(data)
        if not os.path.isdir(workdir):
            os.makedirs(workdir)
            self.made("workdir", path=workdir)  # ours: removed with the cluster when empty
        img = f"{workdir}/{self.name}-fs.img"
        with open(img, "wb") as f:
            f.truncate(int(size * 1.15) + (64 << 20))
        self.made("file", path=img)
        sh("mkfs.ext4", "-q", "-F", "-m", "0", img)
        stage = f"{workdir}/{self.name}-stage"
        os.makedirs(stage, exist_ok=True)
        self.made("dir", path=stage)
        sh("mount", "-o", "loop", img, stage)
        self.made("mount", path=stage)
        dst = f"{stage}/data"
        if os.path.isdir(data):
            shutil.copytree(data, dst)
        else:
            shutil.copyfile(data, dst)
        sh("umount", stage)
        self.state["resources"].pop()  # the staging mount is gone
        self.save()
        # On tmpfs (the default) the image is memory: a buffered loop device reads it without a
        # second cache. On a disk, direct IO keeps the machine's page cache out of the way.
        on_tmpfs = sh("stat", "-f", "-c", "%T", workdir).stdout.strip() == "tmpfs"
        base = sh("losetup", "--find", "--show", "--read-only", f"--direct-io={'off' if on_tmpfs else 'on'}",
                  img).stdout.strip()
        self.made("loop", dev=base)
        cg = f"{CGROUP_ROOT}/blkio/ddpio-sim-{self.name}"
        os.makedirs(cg, exist_ok=True)
        self.made("cgroup", path=cg)
        storage = {"image": img, "base": base, "base_dev": dev_of(base), "cgroup": cg, "loops": [],
                   "mounts": [], "bytes": size, "mbps": 0, "iops": 0, "node_mbps": 0}
        self.state["storage"] = storage
        self.save()
        for i in range(self.nodes):
            loop = sh("losetup", "--find", "--show", "--read-only", "--direct-io=on", base).stdout.strip()
            self.made("loop", dev=loop)
            mnt = f"{workdir}/{self.name}-n{i}"
            os.makedirs(mnt, exist_ok=True)
            self.made("dir", path=mnt)
            sh("mount", "-o", "ro,noload", loop, mnt)
            self.made("mount", path=mnt)
            storage["loops"].append(loop)
            storage["mounts"].append(mnt)
            self.save()

    def throttle(self, mbps=0, iops=0, node_mbps=0):
        """Aggregate MB/s and IOPS of the shared filesystem, and a per-node MB/s cap (0: none)."""
        s = self.state["storage"]
        cg = s["cgroup"]

        def put(f, dev, value):
            with open(f"{cg}/blkio.throttle.{f}", "w") as fh:
                fh.write(f"{dev} {int(value)}\n")

        put("read_bps_device", s["base_dev"], mbps * 1e6)
        put("read_iops_device", s["base_dev"], iops)
        for loop in s["loops"]:
            put("read_bps_device", dev_of(loop), node_mbps * 1e6)
        s.update(mbps=mbps, iops=iops, node_mbps=node_mbps)
        self.save()

    def drop_caches(self):
        """Unmounts and remounts every node's copy: cold page caches, nothing else touched."""
        s = self.state["storage"]
        for loop, mnt in zip(s["loops"], s["mounts"]):
            sh("umount", mnt)
            sh("mount", "-o", "ro,noload", loop, mnt)

    def storage_counters(self):
        """(bytes, ios) read from the shared filesystem by the cluster's processes so far."""
        s = self.state["storage"]
        result = []
        for f in ("io_service_bytes", "io_serviced"):
            value = 0
            with open(f"{s['cgroup']}/blkio.throttle.{f}") as fh:
                for line in fh:
                    parts = line.split()
                    if len(parts) == 3 and parts[0] == s["base_dev"] and parts[1] == "Read":
                        value = int(parts[2])
            result.append(value)
        return tuple(result)

    # ----- CPU ---------------------------------------------------------------------------
    def cpu_cap(self, cores, throttled=None):
        """At most `cores` CPUs per node (0: uncapped), through v1 cpu cgroups; `throttled`:
        {node: cores} for nodes capped apart from the others (a straggler)."""
        throttled = throttled or {}
        groups = self.state.setdefault("cpu_groups", [])
        if not groups and (cores > 0 or throttled):
            for i in range(self.nodes):
                cg = f"{CGROUP_ROOT}/cpu/ddpio-sim-{self.name}-n{i}"
                os.makedirs(cg, exist_ok=True)
                self.made("cgroup", path=cg)
                groups.append(cg)
        for i, cg in enumerate(groups):
            node_cores = throttled.get(i, cores)
            with open(f"{cg}/cpu.cfs_quota_us", "w") as fh:
                fh.write(str(int(node_cores * 100000)) if node_cores > 0 else "-1")
        self.state["cpu_cores"] = cores
        self.state["cpu_throttled"] = {str(k): v for k, v in throttled.items()}
        self.save()

    def cgroups_of(self, i):
        out = []
        if self.state.get("storage"):
            out.append(self.state["storage"]["cgroup"])
        groups = self.state.get("cpu_groups") or []
        if groups:
            out.append(groups[i])
        return out

    def node_command(self, i, argv):
        """argv run in node i: its cgroups joined first (ip netns exec would hide cgroupfs),
        then its network namespace entered."""
        joins = " ".join(f"echo $$ > {cg}/cgroup.procs &&" for cg in self.cgroups_of(i))
        return ["sh", "-c", f'{joins} exec nsenter --net=/run/netns/{self.ns(i)} -- "$@"', "sh", *argv]

    # ----- lifecycle ---------------------------------------------------------------------
    def down(self, quiet=False):
        """Removes every recorded resource, newest first; keeps going past failures."""
        problems = []
        for r in self.state["resources"]:  # first, nothing of the job may still run
            if r["kind"] == "netns":
                kill_netns(r["name"])
            elif r["kind"] == "cgroup":
                kill_cgroup(r["path"])
        for r in reversed(self.state["resources"]):
            k = r["kind"]
            try:
                if k == "mount":
                    p = sh("umount", r["path"], check=False)
                    if p.returncode != 0 and os.path.ismount(r["path"]):
                        time.sleep(0.2)  # a process of the job may still be closing its files
                        sh("umount", "-l", r["path"])
                elif k == "loop":
                    sh("losetup", "-d", r["dev"], check=False)
                elif k == "cgroup":
                    kill_cgroup(r["path"])
                    if os.path.isdir(r["path"]):
                        os.rmdir(r["path"])
                elif k == "link":
                    sh("ip", "link", "del", r["name"], check=False)
                elif k == "netns":
                    kill_netns(r["name"])
                    sh("ip", "netns", "del", r["name"], check=False)
                elif k == "dir":
                    if os.path.isdir(r["path"]):
                        os.rmdir(r["path"])
                elif k == "workdir":  # shared with other clusters running now: only when empty
                    if os.path.isdir(r["path"]) and not os.listdir(r["path"]):
                        os.rmdir(r["path"])
                elif k == "s3":  # its daemons were killed with the namespace: this removes the rest
                    sh(OBJECT_STORE, "down", "--dir", r["dir"], check=False)
                elif k == "file":
                    if os.path.exists(r["path"]):
                        os.remove(r["path"])
            except (OSError, SimError) as e:
                problems.append(f"{k} {r}: {e}")
        shutil.rmtree(self.dir, ignore_errors=True)
        if problems and not quiet:
            raise SimError("teardown left: " + "; ".join(problems))


def _bytes_of(path):
    if os.path.isdir(path):
        return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)
    return os.path.getsize(path)


def kill_cgroup(path):
    """SIGKILLs whatever still runs in a cgroup (a rank that outlived its job)."""
    procs = f"{path}/cgroup.procs"
    for _ in range(50):
        try:
            with open(procs) as f:
                pids = [int(x) for x in f.read().split()]
        except OSError:
            return
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, 9)
            except ProcessLookupError:
                pass
        time.sleep(0.05)


def cut_link(name):
    """Takes a node's link down: nothing it sends leaves, nothing sent to it arrives — no reset,
    no FIN; its peers learn of it only by their timeouts."""
    sh("ip", "-n", name, "link", "set", "eth0", "down")


def restore_link(name):
    sh("ip", "-n", name, "link", "set", "eth0", "up")


def kill_netns(name):
    p = sh("ip", "netns", "pids", name, check=False)
    for pid in p.stdout.split():
        try:
            os.kill(int(pid), 9)
        except (ProcessLookupError, ValueError):
            pass


def existing():
    """Names of clusters with state on this machine."""
    if not os.path.isdir(STATE_ROOT):
        return []
    return sorted(d for d in os.listdir(STATE_ROOT) if os.path.exists(f"{STATE_ROOT}/{d}/state.json"))
