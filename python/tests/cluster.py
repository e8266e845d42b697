"""Real ranksweepd and ranksweep-worker processes on loopback for the Python
client's tests: a coordinator on a temporary SQLite file (port 0), workers,
and the ranksweep CLI against it. Imports nothing of the package, so a test
running under another interpreter than the package's may use it too.
RANKSWEEP_BIN_DIR names the directory of the three binaries.
"""

import os
import re
import signal
import subprocess
import tempfile
import time

BIN = os.environ.get("RANKSWEEP_BIN_DIR", "build/bin")


def wait_for_line(path, pattern, proc, timeout=60):
    """The first group of the first line of file `path` matching `pattern`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with open(path, errors="replace") as f:
            m = re.search(pattern, f.read())
        if m:
            return m.group(1)
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    with open(path.replace(".out", ".err"), errors="replace") as f:
        raise AssertionError(f"no line matching {pattern!r} in {path}; stderr:\n{f.read()}")


class Cluster:
    """ranksweepd (and optionally a worker) in a temporary directory."""

    def __init__(self, insecure=True):
        self.dir = tempfile.TemporaryDirectory(prefix="ranksweep-py-")
        self.db = os.path.join(self.dir.name, "ranksweep.db")
        self.procs = []
        self.insecure = insecure
        self.server_flags = []

    def create_token(self, name, role):
        """A new token, made by `ranksweepd token create` on the database."""
        r = subprocess.run([f"{BIN}/ranksweepd", "token", "create", f"--db={self.db}",
                            f"--name={name}", f"--role={role}"],
                           capture_output=True, text=True, timeout=60, check=True)
        return r.stdout.strip()

    def start(self, worker=True, port=0):
        self.start_server(port)
        if worker:
            self.start_worker()

    def start_worker(self):
        """A ranksweep-worker of one slot and one thread; returns its process."""
        return self.spawn(f"worker{len(self.procs)}",
                          [f"{BIN}/ranksweep-worker", f"--coordinator={self.addr}",
                           "--device=cpu", "--slots=1"],
                          env={"RANKSWEEP_TORCH_THREADS": "1"})

    @staticmethod
    def stop_process(proc):
        """SIGTERM, as an operator stops a worker: it ends its work and exits 0."""
        proc.send_signal(signal.SIGTERM)
        return proc.wait(timeout=60)

    def start_server(self, port=0):
        args = [f"{BIN}/ranksweepd", f"--listen=127.0.0.1:{port}", f"--db={self.db}",
                "--lease_seconds=10"]
        if self.insecure:
            args.append("--insecure_local")
        args += self.server_flags
        name = f"server{len(self.procs)}"
        self.server = self.spawn(name, args)
        self.addr = wait_for_line(os.path.join(self.dir.name, f"{name}.out"),
                                  r"listening on (\S+)", self.server)

    def kill_server(self):
        self.server.kill()
        self.server.wait()

    def spawn(self, name, args, env=None):
        out = open(os.path.join(self.dir.name, f"{name}.out"), "w")
        err = open(os.path.join(self.dir.name, f"{name}.err"), "w")
        proc = subprocess.Popen(args, stdout=out, stderr=err,
                                env={**os.environ, **(env or {})})
        out.close()
        err.close()
        self.procs.append(proc)
        return proc

    def cli(self, *args, check=True):
        r = subprocess.run([f"{BIN}/ranksweep", f"--addr={self.addr}", *args],
                           capture_output=True, text=True, timeout=120)
        if check and r.returncode != 0:
            raise AssertionError(f"ranksweep {' '.join(args)}: exit {r.returncode}: {r.stderr}")
        return r

    def stop(self):
        for proc in reversed(self.procs):  # the worker first, then the server
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.dir.cleanup()
