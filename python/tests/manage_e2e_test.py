"""Managing sweeps from Python against real processes on loopback:
note/tag/untag/rename/archive, list() by tag, search and archive, retry of
cancelled cells trained by a real worker, and delete with its confirmation,
with the same exact counts `ranksweep sweep ...` gives. RANKSWEEP_BIN_DIR
names the directory of the binaries.
"""

import os
import unittest

import grpc
import yaml

import ranksweep
from ranksweep import RanksweepError

from cluster import Cluster  # this directory is on sys.path

HERE = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(HERE, "tiny_sweep.yaml")) as _f:
    TINY = yaml.safe_load(_f)  # plain YAML: PyYAML reads it as the coordinator does
TINY_CELLS = 6


class ManageEndToEndTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.cluster = Cluster()
        try:
            cls.cluster.start(worker=False)
            cls.client = ranksweep.Client(addr=cls.cluster.addr)
        except BaseException:
            cls.cluster.stop()
            raise

    @classmethod
    def tearDownClass(cls):
        cls.client.close()
        cls.cluster.stop()

    def test_manage_a_sweep_from_notes_to_delete(self):
        rs = self.client
        a = rs.submit(dict(TINY, name="py-lengths"))
        b = rs.submit(dict(TINY, name="py-other"))

        got = rs.note(a, "lr too high; rerun at 0.003")
        self.assertEqual(got, {"sweep_id": a, "name": "py-lengths",
                               "note": "lr too high; rerun at 0.003", "tags": [],
                               "archived": False})
        self.assertEqual(rs.tag(a, "paper", "ood")["tags"], ["ood", "paper"])
        self.assertEqual(rs.untag(a, "ood")["tags"], ["paper"])
        self.assertEqual(rs.rename(a, "py-lengths-v2")["name"], "py-lengths-v2")
        with self.assertRaises(RanksweepError) as ctx:
            rs.tag(a, "bad tag")
        self.assertEqual(ctx.exception.code, grpc.StatusCode.INVALID_ARGUMENT)
        self.assertEqual(ctx.exception.message,
                         'tags[0] must use only the characters A-Z a-z 0-9 . _ : -, got '
                         '"bad tag"')

        listed = rs.list(tag="paper")
        self.assertEqual(listed["sweep_id"].tolist(), [a])
        self.assertEqual(listed["tags"].tolist(), [["paper"]])
        self.assertEqual(listed["note"].tolist(), ["lr too high; rerun at 0.003"])
        self.assertEqual(rs.list(search="RERUN")["sweep_id"].tolist(), [a])
        self.assertEqual(rs.list(search="other")["sweep_id"].tolist(), [b])
        self.assertEqual(len(rs.list()), 2)
        rs.archive(b)
        self.assertEqual(rs.list()["sweep_id"].tolist(), [a])
        archived = rs.list(include_archived=True)
        self.assertEqual(sorted(archived["sweep_id"]), sorted([a, b]))
        self.assertEqual(archived.set_index("sweep_id").loc[b, "archived"], True)
        self.assertEqual(rs.list()["note"].tolist(), ["lr too high; rerun at 0.003"])

        # Every cell cancelled before any trained; retried; a real worker
        # trains exactly those, and b stays untouched.
        self.assertEqual(rs.cancel(a), TINY_CELLS)
        self.assertEqual(rs.cancel(b), TINY_CELLS)
        self.assertEqual(rs.retry(a, failed=True, cancelled=False), 0)
        self.assertEqual(rs.retry(a), TINY_CELLS)
        self.cluster.start_worker()
        last = rs.wait(a)
        self.assertEqual((last.state, last.done, last.cancelled), ("DONE", TINY_CELLS, 0))
        self.assertEqual(len(rs.results(a)), TINY_CELLS)
        self.assertEqual(len(rs.results(b)), 0)

        with self.assertRaises(RanksweepError) as ctx:
            rs.delete(a, confirm="sw-")
        self.assertEqual(ctx.exception.code, grpc.StatusCode.FAILED_PRECONDITION)
        self.assertEqual(len(rs.results(a)), TINY_CELLS)
        self.assertEqual(rs.delete(a, confirm=a),
                         {"cells_deleted": TINY_CELLS, "results_deleted": TINY_CELLS})
        with self.assertRaises(RanksweepError) as ctx:
            rs.status(a)
        self.assertEqual(ctx.exception.code, grpc.StatusCode.NOT_FOUND)
        self.assertEqual(rs.list(include_archived=True)["sweep_id"].tolist(), [b])


if __name__ == "__main__":
    unittest.main()
