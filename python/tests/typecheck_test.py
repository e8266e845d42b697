"""mypy over the installed package, and over code that uses it as a user's
would: the package checks clean under python/pyproject.toml's [tool.mypy]
(every function annotated), and a caller's mistake is found through the
package's py.typed marker.

argv: the Python of a virtual environment the package is installed in.
MYPY names mypy (default: mypy on PATH).
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
CONFIG = os.path.join(os.path.dirname(HERE), "pyproject.toml")
MYPY = os.environ.get("MYPY") or shutil.which("mypy") or "mypy"
PYTHON = sys.argv.pop(1) if len(sys.argv) > 1 else sys.executable


def mypy(*args, cwd=None):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MYPYPATH")}
    return subprocess.run([MYPY, "--config-file", CONFIG, "--no-incremental", *args],
                          capture_output=True, text=True, timeout=300, cwd=cwd, env=env)


class TypecheckTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        r = subprocess.run([PYTHON, "-c", "import os, ranksweep; "
                                          "print(os.path.dirname(ranksweep.__file__))"],
                           capture_output=True, text=True, timeout=60, check=True)
        cls.package = r.stdout.strip()
        cls.sources = sorted(
            os.path.join(d, f) for d, _, files in os.walk(cls.package) for f in files
            if f.endswith(".py") and not (f.endswith("_pb2.py") and
                                          os.path.exists(os.path.join(d, f + "i"))))
        cls.sources += sorted(os.path.join(d, f) for d, _, files in os.walk(cls.package)
                              for f in files if f.endswith(".pyi"))

    def test_the_package_checks_clean(self):
        r = mypy(self.package)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        # Every module was read: the package's own and the generated ones
        # (the messages through their .pyi stub).
        self.assertEqual(r.stdout.strip(),
                         f"Success: no issues found in {len(self.sources)} source files")
        self.assertGreaterEqual(len(self.sources), 8)

    def test_a_caller_s_mistakes_are_found_through_py_typed(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "caller" + ".py")  # a file of the test's own
            with open(path, "w") as f:
                f.write("import ranksweep\n"
                        "rs = ranksweep.Client(timeout=10.0)\n"
                        "sweep: int = rs.submit({'name': 'x'})\n"       # submit returns str
                        "spec = rs.spec('sw-1')\n"
                        "name: str = spec['name']\n"                    # a dict: fine
                        "rs.results('sw-1', ranks='1,8')\n"            # ranks: a sequence of int
                        "rs.cancel(42)\n")                              # an id is a str
            r = mypy("--python-executable", PYTHON, path, cwd=tmp)
        errors = re.findall(r"^caller\.py:(\d+): error: (.*)$", r.stdout, re.M)
        self.assertEqual([int(line) for line, _ in errors], [3, 6, 7], r.stdout + r.stderr)
        self.assertIn('expression has type "str", variable has type "int"', errors[0][1])
        self.assertIn('"ranks"', errors[1][1])
        self.assertIn('"cancel"', errors[2][1])


if __name__ == "__main__":
    unittest.main()
