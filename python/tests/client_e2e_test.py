"""The Python client against real processes on loopback: ranksweepd on a
temporary SQLite file (port 0), one ranksweep-worker training real (small)
heads, and the ranksweep CLI, whose JSON every DataFrame is checked against.

Two sweeps: a witness family (no test split, theory bounds) with a kernel
head at two ranks and softmax (no rank), submitted from a dict; a pool
dataset with a test split, submitted from a YAML file.
RANKSWEEP_BIN_DIR names the directory of the three binaries.
"""

import json
import math
import os
import re
import signal
import subprocess
import tempfile
import time
import unittest

import grpc
import pandas as pd

import ranksweep
from ranksweep import RanksweepError, SpecError

from frames_test import RESULT_DTYPES  # this directory is on sys.path

BIN = os.environ.get("RANKSWEEP_BIN_DIR", "build/bin")

HERE = os.path.dirname(os.path.abspath(__file__))
# A witness family (4 queries of a weight-4 code in {0,1}^8: 28 sequences, no
# test split): 2 ranks x 2 seeds of a kernel head + 2 softmax seeds. Read
# from its file, submitted as a dict.
WITNESS = ranksweep.load_spec(os.path.join(HERE, "tiny_sweep.yaml"))
WITNESS_CELLS = 6

# Bernoulli tokens in {0,1}^6 split into disjoint train and test pools.
POOL_YAML = """\
name: py-pool
dataset:
  kind: pool
  m: 6
  seq_len: 3
  bernoulli_p: 0.5
  pool_size: 40
  train_size: 64
  test_size: 32
heads:
  - {kind: kernel, feature_map: elu1}
ranks: [4]
seed_count: 2
train: {lr: 3e-2, max_steps: 200, eval_every: 50}
"""
POOL_CELLS = 2


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
            self.spawn("worker", [f"{BIN}/ranksweep-worker", f"--coordinator={self.addr}",
                                  "--device=cpu", "--slots=1"],
                       env={"RANKSWEEP_TORCH_THREADS": "1"})

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


def cli_state(text):
    """The CLI's JSON spells states as the proto does (CELL_STATE_DONE)."""
    return text.replace("CELL_STATE_", "", 1)


class ClientEndToEndTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.cluster = Cluster()
        try:
            cls.cluster.start()
            cls.client = ranksweep.Client(addr=cls.cluster.addr)
            cls.witness = cls.client.submit(WITNESS)
            cls.witness_events = list(cls.client.watch(cls.witness))
            pool_path = os.path.join(cls.cluster.dir.name, "pool.yaml")
            with open(pool_path, "w") as f:
                f.write(POOL_YAML)
            cls.pool = cls.client.submit(pool_path)
            cls.pool_last = cls.client.wait(cls.pool)
        except BaseException:
            cls.cluster.stop()
            raise

    @classmethod
    def tearDownClass(cls):
        cls.client.close()
        cls.cluster.stop()

    def cli_json(self, *args):
        return json.loads(self.cluster.cli(*args).stdout)

    # ------------------------------------------------------------ watch

    def test_watch_follows_the_sweep_to_done(self):
        events = self.witness_events
        self.assertGreaterEqual(len(events), 2)
        last = events[-1]
        self.assertEqual((last.sweep_id, last.name, last.state), (self.witness, "py-tiny",
                                                                  "DONE"))
        self.assertTrue(last.ended)
        self.assertEqual((last.total, last.done, last.failed, last.pending, last.running),
                         (WITNESS_CELLS, WITNESS_CELLS, 0, 0, 0))
        # The event of the last cell may already read the sweep DONE; from
        # the first ended event on, every one says DONE.
        first_end = next(i for i, e in enumerate(events) if e.ended)
        self.assertEqual({e.state for e in events[first_end:]}, {"DONE"})
        self.assertEqual({e.state for e in events[:first_end]}, {"RUNNING"})
        done = [e.done for e in events]
        self.assertEqual(done, sorted(done))
        self.assertEqual(self.pool_last.state, "DONE")
        self.assertEqual(self.pool_last.done, POOL_CELLS)

    # ------------------------------------------------------------ results

    def check_rows_match_cli(self, df, sweep):
        rows = self.cli_json("results", sweep, "--format", "json")
        self.assertEqual(len(df), len(rows))
        for (_, got), want in zip(df.iterrows(), rows):
            res = want["result"]
            # Without a test split the CLI prints test sequences 0 (or leaves
            # the split out as null).
            test = res.get("test") or {}
            has_test = (test.get("sequences") or 0) > 0
            self.assertEqual(got["cell_id"], want["cell_id"])
            self.assertEqual(got["sweep_id"], want["sweep_id"])
            self.assertEqual(got["head"], want["head"])
            self.assertEqual(got["head_index"], want["head_index"])
            if want["rank"] in (0, None):
                self.assertIs(got["rank"], pd.NA)
            else:
                self.assertEqual(got["rank"], want["rank"])
            self.assertEqual(got["seed"], want["seed"])
            self.assertEqual(got["state"], cli_state(want["state"]))
            for m in ("error", "exact_accuracy", "position_accuracy", "max_abs_error"):
                self.assertEqual(got[f"train_{m}"], res["train"][m], m)
                if has_test:
                    self.assertEqual(got[f"test_{m}"], test[m], m)
                else:
                    self.assertTrue(math.isnan(got[f"test_{m}"]), m)
            self.assertEqual(got["train_sequences"], res["train"]["sequences"])
            if has_test:
                self.assertEqual(got["test_sequences"], test["sequences"])
            else:
                self.assertIs(got["test_sequences"], pd.NA)
            for f in ("final_loss", "steps", "wall_seconds", "device"):
                self.assertEqual(got[f], res[f], f)
            self.assertEqual(got["distinct_queries"], res["facts"]["distinct_queries"])
            for bound in ("rank_lower_bound", "rank_upper_bound"):
                if res["facts"][bound] == 0:
                    self.assertIs(got[bound], pd.NA)
                else:
                    self.assertEqual(got[bound], res["facts"][bound])
            for f in ("worker_id", "attempt", "lease_id"):
                self.assertEqual(got[f], want[f], f)
            for f in ("build_id", "torch_version"):
                self.assertEqual(got[f], want["worker_version"][f], f)
            self.assertEqual(got["finished"],
                             pd.Timestamp(want["finished_unix_ms"], unit="ms", tz="UTC"))
            self.assertIsNone(got["failure"])

    def test_witness_results(self):
        df = self.client.results(self.witness)
        self.assertEqual(len(df), WITNESS_CELLS)
        self.assertEqual(list(df.columns), list(RESULT_DTYPES))
        self.assertEqual({c: str(t) for c, t in df.dtypes.items()}, RESULT_DTYPES)
        cells = sorted((h, -1 if r is pd.NA else r, s)
                       for h, r, s in zip(df["head"], df["rank"], df["seed"]))
        self.assertEqual(cells, [("kernel/elu1", 1, 0), ("kernel/elu1", 1, 1),
                                 ("kernel/elu1", 8, 0), ("kernel/elu1", 8, 1),
                                 ("softmax", -1, 0), ("softmax", -1, 1)])
        self.assertEqual(df["state"].tolist(), ["DONE"] * WITNESS_CELLS)
        # The witness family has no test split: missing, not 1.0 or 0.
        for c in ("test_sequences", "test_error", "test_exact_accuracy",
                  "test_position_accuracy", "test_max_abs_error"):
            self.assertTrue(df[c].isna().all(), c)
        self.assertTrue(df["train_error"].notna().all())
        self.assertEqual(df["train_sequences"].tolist(), [28] * WITNESS_CELLS)
        # Every position is scored, so the 4 codewords and their 4 complement
        # keys are all queries: the upper bound n is 8 distinct queries.
        self.assertEqual(df["distinct_queries"].tolist(), [8] * WITNESS_CELLS)
        self.assertEqual(df["rank_upper_bound"].tolist(), [8] * WITNESS_CELLS)
        self.assertTrue(df["rank_lower_bound"].notna().all())
        self.assertEqual(df["device"].tolist(), ["cpu"] * WITNESS_CELLS)
        self.check_rows_match_cli(df, self.witness)

    def test_pool_results_keep_the_test_split(self):
        df = self.client.results(self.pool)
        self.assertEqual(len(df), POOL_CELLS)
        self.assertEqual({c: str(t) for c, t in df.dtypes.items()}, RESULT_DTYPES)
        self.assertEqual(df["rank"].tolist(), [4, 4])
        self.assertEqual(df["test_sequences"].tolist(), [32, 32])
        self.assertTrue(df["test_error"].notna().all())
        self.assertTrue(df["rank_lower_bound"].isna().all())  # no theory bound here
        self.check_rows_match_cli(df, self.pool)

    def test_results_filters_and_pages(self):
        df = self.client.results(self.witness, head="kernel/elu1", ranks=[8], page_size=1)
        self.assertEqual(df["rank"].tolist(), [8, 8])
        self.assertEqual(df["seed"].tolist(), [0, 1])
        pd.testing.assert_frame_equal(
            self.client.results(self.witness, page_size=2),
            self.client.results(self.witness))
        self.assertEqual(len(self.client.results(self.witness, state="failed")), 0)
        self.assertEqual(len(self.client.results(self.witness, state="DONE")), WITNESS_CELLS)
        with self.assertRaises(ValueError) as ctx:
            self.client.results(self.witness, state="leased")
        self.assertEqual(str(ctx.exception), 'state: "leased" is not one of done, failed')

    def test_groups_match_the_cli(self):
        df = self.client.groups(self.witness, by="head,rank")
        want = self.cli_json("results", self.witness, "--group-by", "head,rank",
                             "--format", "json")
        self.assertEqual(len(df), 3)
        self.assertEqual(len(want), 3)
        self.assertEqual(str(df["rank"].dtype), "Int64")
        for (_, got), g in zip(df.iterrows(), want):
            self.assertEqual(got["head"], g["head"])
            self.assertEqual(got["rank"] if got["rank"] is not pd.NA else 0, g["rank"] or 0)
            self.assertEqual((got["n"], got["expected"], got["exact_seeds"]),
                             (g["n"], g["expected"], g["exact_seeds"]))
            self.assertEqual((got["n"], got["expected"]), (2, 2))
            self.assertEqual(got["missing_seeds"], [])
            for a in ("train_error", "train_exact_accuracy", "train_position_accuracy"):
                for f in ("mean", "std", "min", "max", "ci95"):
                    self.assertEqual(got[f"{a}_{f}"], g[a][f], f"{a}_{f}")
            self.assertTrue(all(math.isnan(got[f"test_error_{f}"])
                                for f in ("mean", "std", "min", "max", "ci95")))
            self.assertIs(got["test_exact_seeds"], pd.NA)
        self.assertIs(df["rank"][2], pd.NA)
        pool = self.client.groups(self.pool, by=("rank", "head"))
        self.assertEqual(len(pool), 1)
        self.assertFalse(math.isnan(pool["test_error_mean"][0]))
        with self.assertRaises(ValueError):
            self.client.groups(self.witness, by="seed")

    def test_summary_matches_the_cli(self):
        df = self.client.summary(self.witness)
        want = self.cli_json("results", self.witness, "--summary", "--format", "json")
        self.assertEqual(df["head"].tolist(), ["kernel/elu1", "softmax"])
        self.assertEqual(df["has_rank"].tolist(), [True, False])
        for (_, got), h in zip(df.iterrows(), want["heads"]):
            self.assertEqual(got["head"], h["head"])
            self.assertEqual(got["reason"], h["reason"])
            if h["transition_defined"]:
                self.assertEqual(got["transition_rank"], h["transition_rank"])
            else:
                self.assertIs(got["transition_rank"], pd.NA)
            self.assertIs(got["test_transition_rank"], pd.NA)
            self.assertIsNone(got["test_reason"])
            self.assertEqual(got["rank_lower_bound"], want["facts"]["rank_lower_bound"])
            self.assertEqual(got["rank_upper_bound"], want["facts"]["rank_upper_bound"])
        self.assertIs(df["transition_rank"][1], pd.NA)  # softmax has no rank
        self.assertEqual(df["rank_upper_bound"].tolist(), [8, 8])
        pool = self.client.summary(self.pool)
        self.assertEqual(pool["rank_upper_bound"].tolist(), [pd.NA])
        self.assertIsNotNone(pool["test_reason"][0])

    # ------------------------------------------------------------ the rest

    def test_list_and_workers(self):
        sweeps = self.client.list(state="done")
        self.assertEqual(sorted(sweeps["sweep_id"]), sorted([self.witness, self.pool]))
        self.assertEqual(sweeps["state"].tolist(), ["DONE", "DONE"])
        self.assertEqual(sweeps["owner"].tolist(), ["local", "local"])
        by_id = sweeps.set_index("sweep_id")
        self.assertEqual(by_id.loc[self.witness, "done"], WITNESS_CELLS)
        self.assertEqual(by_id.loc[self.witness, "total"], WITNESS_CELLS)
        self.assertTrue(sweeps["finished"].notna().all())
        self.assertEqual(self.client.status(self.pool)["done"], POOL_CELLS)
        workers = self.client.workers()
        self.assertEqual(len(workers), 1)
        self.assertEqual(workers["device"][0], "cpu")
        self.assertEqual(workers["slots"][0], 1)
        self.assertTrue(workers["alive"][0])
        self.assertGreaterEqual(workers["completed_cells"][0], WITNESS_CELLS + POOL_CELLS)

    def test_cancel(self):
        spec = dict(WITNESS, name="py-cancel",
                    train={"max_steps": 10000000, "early_stop_evals": 0})
        sweep = self.client.submit(spec)
        self.assertEqual(self.client.cancel(sweep), WITNESS_CELLS)
        last = self.client.wait(sweep)
        self.assertEqual((last.state, last.cancelled), ("CANCELLED", WITNESS_CELLS))

    def test_errors_carry_the_code_and_message(self):
        with self.assertRaises(RanksweepError) as ctx:
            self.client.results("no-such-sweep")
        self.assertEqual(ctx.exception.code, grpc.StatusCode.NOT_FOUND)
        self.assertEqual(ctx.exception.call, "results")
        with self.assertRaises(RanksweepError) as ctx:
            list(self.client.watch("no-such-sweep"))
        self.assertEqual(ctx.exception.code, grpc.StatusCode.NOT_FOUND)
        bad = dict(WITNESS, dataset=dict(WITNESS["dataset"], m=99))
        with self.assertRaises(RanksweepError) as ctx:
            self.client.submit(bad)
        self.assertEqual(ctx.exception.code, grpc.StatusCode.INVALID_ARGUMENT)
        self.assertEqual(ctx.exception.message, "dataset.m must be in 1..64, got 99")
        with ranksweep.Client(addr="127.0.0.1:1", timeout=5) as nowhere:
            with self.assertRaises(RanksweepError) as ctx:
                nowhere.list()
        self.assertEqual(ctx.exception.code, grpc.StatusCode.UNAVAILABLE)

    def test_spec_errors_read_as_the_cli_s(self):
        cases = {
            "unknown.yaml": "name: x\ndataset:\n  kind: witness\n  mm: 3\n",
            "enum.yaml": "name: x\nheads:\n  - kind: kernel\n  - kind: soft\n",
            "type.yaml": "name: x\ndataset: {m: 2.5}\n",
            "dup.yaml": "name: x\nseed_count: 2\nname: y\n",
            "seeds.yaml": "name: x\nseeds: [1, -2]\n",
            "list.yaml": "- 1\n",
            "unknown.json": '{"name": "x", "train": {"lr": 0.1, "step": 3}}',
        }
        for name, text in cases.items():
            path = os.path.join(self.cluster.dir.name, name)
            with open(path, "w") as f:
                f.write(text)
            with self.assertRaises(SpecError) as ctx:
                self.client.submit(path)
            cli = self.cluster.cli("submit", "-f", path, "--dry-run", check=False)
            self.assertEqual(cli.returncode, 1, name)
            self.assertEqual(cli.stderr, f"ranksweep: {ctx.exception.message}\n", name)


class ClientWatchRestartTest(unittest.TestCase):
    """watch() rides out a coordinator that crashes and comes back."""

    def setUp(self):
        self.cluster = Cluster()
        self.addCleanup(self.cluster.stop)

    def test_watch_reconnects_after_a_crash(self):
        self.cluster.start(worker=False)  # no worker: the sweep stays RUNNING
        port = self.cluster.addr.rsplit(":", 1)[1]
        with ranksweep.Client(addr=self.cluster.addr) as client:
            sweep = client.submit(dict(WITNESS, name="py-restart"))
            events = client.watch(sweep, reconnect=60)
            first = next(events)
            self.assertEqual((first.state, first.pending), ("RUNNING", WITNESS_CELLS))
            self.cluster.kill_server()
            self.cluster.start_server(port)  # same file, same port
            again = next(events)  # the first event of the new stream
            self.assertEqual((again.sweep_id, again.state), (sweep, "RUNNING"))
            self.assertEqual(client.cancel(sweep), WITNESS_CELLS)
            rest = list(events)
            self.assertEqual(rest[-1].state, "CANCELLED")
            self.assertEqual(rest[-1].cancelled, WITNESS_CELLS)
        with ranksweep.Client(addr=self.cluster.addr) as client:
            events = client.watch(client.submit(dict(WITNESS, name="py-lost")), reconnect=0)
            next(events)
            self.cluster.kill_server()
            with self.assertRaises(RanksweepError) as ctx:
                next(events)  # reconnect=0: the lost coordinator ends the watch
            self.assertEqual(ctx.exception.code, grpc.StatusCode.UNAVAILABLE)


class ClientAuthTest(unittest.TestCase):
    """Tokens (also through RANKSWEEP_TOKEN and RANKSWEEP_ADDR) and TLS, against
    a coordinator that authenticates."""

    def setUp(self):
        self.cluster = Cluster(insecure=False)
        self.addCleanup(self.cluster.stop)
        self.token = self.cluster.create_token("alice", "user")
        saved = {k: os.environ.get(k) for k in ("RANKSWEEP_ADDR", "RANKSWEEP_TOKEN")}

        def restore():
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
        self.addCleanup(restore)

    def test_environment(self):
        self.cluster.start(worker=False)
        os.environ["RANKSWEEP_ADDR"] = self.cluster.addr
        os.environ.pop("RANKSWEEP_TOKEN", None)
        with ranksweep.Client() as anonymous:
            self.assertEqual(anonymous.addr, self.cluster.addr)
            with self.assertRaises(RanksweepError) as ctx:
                anonymous.list()
            self.assertEqual(ctx.exception.code, grpc.StatusCode.UNAUTHENTICATED)
        os.environ["RANKSWEEP_TOKEN"] = self.token
        with ranksweep.Client() as alice:
            sweep = alice.submit(dict(WITNESS, name="py-token"))
            sweeps = alice.list()
            self.assertEqual(sweeps["sweep_id"].tolist(), [sweep])
            self.assertEqual(sweeps["owner"].tolist(), ["alice"])
            self.assertEqual(alice.cancel(sweep), WITNESS_CELLS)
        with ranksweep.Client(token="rs_not-a-token") as wrong:
            with self.assertRaises(RanksweepError) as ctx:
                wrong.list()
            self.assertEqual(ctx.exception.code, grpc.StatusCode.UNAUTHENTICATED)

    def test_tls(self):
        # A self-signed certificate for 127.0.0.1 is its own CA (docs/SECURITY.md).
        cert = os.path.join(self.cluster.dir.name, "server.pem")
        key = os.path.join(self.cluster.dir.name, "server.key")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                        "-subj", "/CN=localhost",
                        "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
                        "-keyout", key, "-out", cert], capture_output=True, check=True,
                       timeout=60)
        self.cluster.server_flags = [f"--tls_cert={cert}", f"--tls_key={key}"]
        self.cluster.start(worker=False)
        with ranksweep.Client(addr=self.cluster.addr, token=self.token, tls_ca=cert) as tls:
            self.assertEqual(len(tls.list()), 0)
            self.assertEqual(len(tls.workers()), 0)
        with ranksweep.Client(addr=self.cluster.addr, token=self.token, timeout=5) as plain:
            with self.assertRaises(RanksweepError) as ctx:
                plain.list()
            self.assertEqual(ctx.exception.code, grpc.StatusCode.UNAVAILABLE)


if __name__ == "__main__":
    unittest.main()
