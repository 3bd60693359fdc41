"""The cluster in a box (tests/chaos): network namespaces joined by a bridge, the
link faults this kernel offers, node certificates, and b10d processes run with the
shipped unit's flags. Only addresses inside namespaces made here are used, and
everything made is removed again (Cluster.close).

Layout: a namespace `b10c-PID-br` holds the bridge; node i has a namespace
`b10c-PID-nI` whose device `c0` (a veth whose peer is on the bridge) has
10.233.0.(I+1)/24. Link faults per node, inside its namespace:
  nft table `inet chaos`: partitions (both ways, one way) by address, loss bursts
  (numgen random), all re-rendered from the node's set of active rules;
  tc tbf on c0: a rate limit; `ip link set c0 down`: a link down.
"""
import os
import shlex
import signal
import subprocess
import time


def sh(cmd, check=True, **kw):
    """Run an administrative command (ip, tc, nft); its output on failure."""
    r = subprocess.run(cmd, shell=isinstance(cmd, str), capture_output=True, text=True, **kw)
    if check and r.returncode != 0:
        raise RuntimeError(f"{cmd if isinstance(cmd, str) else shlex.join(cmd)}: "
                           f"{(r.stderr or r.stdout).strip()}")
    return r


def unit_opts(top):
    """B10D_OPTS of the shipped unit's environment file (systemd/b10d.env)."""
    with open(os.path.join(top, "systemd", "b10d.env")) as f:
        for line in f:
            if line.startswith("B10D_OPTS="):
                return shlex.split(line.split("=", 1)[1].strip().strip('"'))
    raise RuntimeError("systemd/b10d.env names no B10D_OPTS")


def mem_cgroup_root():
    """This process's memory cgroup (v1) or unified (v2) directory, or None."""
    try:
        with open("/proc/self/cgroup") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    for line in lines:
        _, ctrls, path = line.split(":", 2)
        if "memory" in ctrls.split(",") and os.path.isdir("/sys/fs/cgroup/memory" + path):
            return "/sys/fs/cgroup/memory" + path.rstrip("/"), "v1"
    for line in lines:
        if line.startswith("0::"):
            d = "/sys/fs/cgroup" + line[3:].rstrip("/")
            if os.path.exists(d + "/memory.max"):
                return d, "v2"
    return None


class Node:
    def __init__(self, cl, i):
        self.cl, self.i = cl, i
        self.name = f"n{i}"
        self.ns = f"b10c-{cl.pid}-n{i}"
        self.ip = f"10.233.0.{i + 1}"
        self.sock = os.path.join(cl.run, f"{self.name}.sock")
        self.log = os.path.join(cl.run, f"{self.name}.log")
        self.proc = None
        self.rules = {}         # fault id -> (chain, rule text)
        self.cg = None
        self.keys = None        # (--cluster-key, --cluster-key-next): set by Cluster.setup
        self.boots = 0

    # -- the daemon

    def argv(self):
        cl = self.cl
        a = [cl.b10d, "--socket", self.sock, "--name", self.name, "--cluster-key", self.keys[0]]
        if self.keys[1]:
            a += ["--cluster-key-next", self.keys[1]]
        a += ["--node-cert", os.path.join(cl.certs, f"{self.name}.crt"),
              "--node-key", os.path.join(cl.certs, f"{self.name}.key"),
              "--node-ca", os.path.join(cl.ca, "ca.crt")]
        return ["ip", "netns", "exec", self.ns] + a + cl.opts + cl.extra_opts.get(self.i, [])

    def start(self):
        cl = self.cl
        self.boots += 1
        env = dict(os.environ, UCX_NET_DEVICES="c0", UCX_TLS="tcp,self", UCX_TCP_CM_REUSEADDR="y")
        env.update(cl.daemon_env)
        cg = self.cg

        def pre():
            # The unit's limits as far as this machine lets a process raise them (a
            # container's hard limits stand), and its memory cgroup (MemoryMax=) from the
            # first instruction.
            import resource
            for res, want in ((resource.RLIMIT_NOFILE, 65536),
                              (resource.RLIMIT_MEMLOCK, resource.RLIM_INFINITY)):
                hard = resource.getrlimit(res)[1]
                if hard != resource.RLIM_INFINITY and (want == resource.RLIM_INFINITY or want > hard):
                    want = hard
                resource.setrlimit(res, (want, hard))
            if cg:
                with open(os.path.join(cg, "cgroup.procs"), "w") as f:
                    f.write(str(os.getpid()))
        logf = open(self.log, "a")
        logf.write(f"---- boot {self.boots}: {shlex.join(self.argv())}\n")
        logf.flush()
        self.proc = subprocess.Popen(self.argv(), stdout=logf, stderr=subprocess.STDOUT, env=env,
                                     preexec_fn=pre, stdin=subprocess.DEVNULL)
        logf.close()
        self.started_at = time.monotonic()

    def up(self):
        return self.proc is not None and self.proc.poll() is None

    def signal(self, sig):
        if self.up():
            try:
                os.kill(self.proc.pid, sig)
            except ProcessLookupError:
                pass

    # -- its links

    def render(self):
        """The node's nft rules: those of every fault active on it."""
        lines = ["flush chain inet chaos in", "flush chain inet chaos out"]
        for chain, rule in self.rules.values():
            lines.append(f"add rule inet chaos {chain} {rule}")
        sh(["ip", "netns", "exec", self.ns, "nft", "-f", "-"], input="\n".join(lines) + "\n")

    def add_rule(self, fid, chain, rule):
        self.rules[fid] = (chain, rule)
        self.render()

    def del_rule(self, fid):
        if self.rules.pop(fid, None) is not None:
            self.render()

    def link(self, up):
        sh(["ip", "-n", self.ns, "link", "set", "c0", "up" if up else "down"])

    def rate(self, mbit):
        if mbit:
            sh(["tc", "-n", self.ns, "qdisc", "replace", "dev", "c0", "root", "tbf", "rate",
                f"{mbit}mbit", "burst", "32kb", "latency", "400ms"])
        else:
            sh(["tc", "-n", self.ns, "qdisc", "del", "dev", "c0", "root"], check=False)

    def mem_limit(self, nbytes):
        """The daemon's memory cgroup limit (None: the unit's MemoryMax=4G)."""
        if not self.cg:
            return False
        v = str(nbytes if nbytes else 4 << 30)
        f = "memory.limit_in_bytes" if self.cl.cg_kind == "v1" else "memory.max"
        try:
            with open(os.path.join(self.cg, f), "w") as fh:
                fh.write(v)
            return True
        except OSError:
            return False

    def mem_usage(self):
        f = "memory.usage_in_bytes" if self.cl.cg_kind == "v1" else "memory.current"
        try:
            with open(os.path.join(self.cg, f)) as fh:
                return int(fh.read())
        except (OSError, TypeError, ValueError):
            return 0


class Cluster:
    def __init__(self, top, build, run, nodes, staging, ttl_ms, extra_opts=None, daemon_env=None):
        self.top, self.run, self.pid = top, run, os.getpid()
        self.b10d = os.path.join(build, "bin", "b10d")
        self.b10ctl = os.path.join(build, "bin", "b10ctl")
        self.br = f"b10c-{self.pid}-br"
        self.made_ns = []
        self.made_cg = []
        self.ca = os.path.join(run, "ca")
        self.certs = os.path.join(run, "certs")
        self.keys_dir = os.path.join(run, "keys")
        # The shipped unit's options, then what a box of many daemons on one machine needs:
        # a smaller staging pool each (locked memory), a quarantine TTL that lets a short
        # run see its quarantine drain. Said in the run's header.
        self.unit = unit_opts(top)
        self.opts = self.unit + ["--staging-bytes", staging, "--quarantine-ttl-ms", str(ttl_ms)]
        self.extra_opts = extra_opts or {}
        self.daemon_env = daemon_env or {}
        self.key_files = []
        self.nkeys = 0
        cg = mem_cgroup_root()
        self.cg_root, self.cg_kind = cg if cg else (None, None)
        self.nodes = [Node(self, i) for i in range(nodes)]

    # -- making it

    @staticmethod
    def can_make():
        """None where namespaces can be made here, else why not."""
        if os.geteuid() != 0:
            return "not root: network namespaces need it"
        name = f"b10c-{os.getpid()}-probe"
        r = sh(["ip", "netns", "add", name], check=False)
        if r.returncode != 0:
            return f"cannot create network namespaces: {r.stderr.strip()}"
        sh(["ip", "netns", "del", name], check=False)
        for tool in ("nft", "tc"):
            if sh(["sh", "-c", f"command -v {tool}"], check=False).returncode != 0:
                return f"no {tool}(8)"
        return None

    def new_key(self):
        self.nkeys += 1
        path = os.path.join(self.keys_dir, f"k{self.nkeys}.key")
        sh([self.b10d, "--gen-key", path])
        self.key_files.append(path)
        return path

    def issue_cert(self, name, into):
        sh([self.b10d, "--issue-node-cert", name, "--ca-cert", os.path.join(self.ca, "ca.crt"),
            "--ca-key", os.path.join(self.ca, "ca.key"), "--out", into, "--days", "30"])

    def setup(self):
        for d in (self.ca, self.certs, self.keys_dir):
            os.makedirs(d, exist_ok=True)
        sh([self.b10d, "--make-ca", self.ca])
        self.new_key()
        for n in self.nodes:
            n.keys = (self.key_files[0], None)
            self.issue_cert(n.name, self.certs)
        self._ns(self.br)
        sh(["ip", "-n", self.br, "link", "add", "br0", "type", "bridge"])
        sh(["ip", "-n", self.br, "link", "set", "br0", "up"])
        for n in self.nodes:
            self._ns(n.ns)
            sh(["ip", "link", "add", "c0", "netns", n.ns, "type", "veth", "peer", "name",
                f"v{n.i}", "netns", self.br])
            sh(["ip", "-n", self.br, "link", "set", f"v{n.i}", "master", "br0", "up"])
            sh(["ip", "-n", n.ns, "addr", "add", f"{n.ip}/24", "dev", "c0"])
            sh(["ip", "-n", n.ns, "link", "set", "lo", "up"])
            sh(["ip", "-n", n.ns, "link", "set", "c0", "up"])
            sh(["ip", "netns", "exec", n.ns, "nft", "-f", "-"], input=(
                "add table inet chaos\n"
                "add chain inet chaos in { type filter hook input priority 0; }\n"
                "add chain inet chaos out { type filter hook output priority 0; }\n"))
            if self.cg_root:
                d = os.path.join(self.cg_root, f"b10c-{self.pid}-{n.name}")
                self._made("cgroup", d)
                try:
                    os.mkdir(d)
                    self.made_cg.append(d)
                    n.cg = d
                    n.mem_limit(None)
                except OSError:
                    n.cg = None
        self.wait_links()

    def _ns(self, name):
        sh(["ip", "netns", "add", name])
        self.made_ns.append(name)
        self._made("netns", name)

    def _made(self, what, name):
        """Said in RUN/made before it exists, so that a runner that had to kill this one
        removes it (tests/fault/run.sh, chaos_cleanup)."""
        with open(os.path.join(self.run, "made"), "a") as f:
            f.write(f"{what} {name}\n")

    def wait_links(self, timeout=10.0):
        """Every c0 carrier up (a veth comes up asynchronously; UCX skips a device that is not)."""
        end = time.monotonic() + timeout
        for n in self.nodes:
            while " UP " not in sh(["ip", "-n", n.ns, "-br", "link", "show", "c0"]).stdout + " ":
                if time.monotonic() > end:
                    raise RuntimeError(f"{n.ns}: c0 did not come up")
                time.sleep(0.05)

    # -- asking a daemon

    def ctl(self, node, *args, timeout=5):
        r = subprocess.run([self.b10ctl, "-s", node.sock, "-t", str(timeout * 1000), "--json", *args],
                           capture_output=True, text=True, timeout=timeout + 5)
        return r.returncode, r.stdout

    # -- undoing it

    def close(self):
        for n in self.nodes:
            if n.proc is not None and n.proc.poll() is None:
                try:
                    os.kill(n.proc.pid, signal.SIGCONT)
                    os.kill(n.proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                try:
                    n.proc.wait(10)
                except subprocess.TimeoutExpired:
                    pass
        for ns in reversed(self.made_ns):
            sh(["ip", "netns", "del", ns], check=False)
        self.made_ns = []
        for d in self.made_cg:
            for _ in range(50):
                try:
                    os.rmdir(d)
                    break
                except OSError:
                    time.sleep(0.1)
        self.made_cg = []
