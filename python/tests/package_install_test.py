"""The package as a user installs it: `pip install ./python` into a fresh
virtual environment (made with --system-site-packages, so Debian's grpcio,
protobuf and pandas serve it), imported from a directory outside the
repository with no PYTHONPATH, then used against a real ranksweepd and
ranksweep-worker on loopback: README's three notebook lines run as printed
(on a spec of seconds instead of the demo's), and spec() is the dict the
CLI's `submit --dry-run` prints for the same file. Also `pip install -e` and
the sdist, each from a copy of python/ and proto/.

Runs under the base interpreter (RANKSWEEP_PYTHON); RANKSWEEP_BIN_DIR names
the binaries, RANKSWEEP_VERSION the project's version (CMakeLists.txt).
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import textwrap
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON_DIR = os.path.dirname(HERE)
REPO = os.path.dirname(PYTHON_DIR)
BIN = os.environ.get("RANKSWEEP_BIN_DIR", os.path.join(REPO, "build", "bin"))
VERSION = os.environ.get("RANKSWEEP_VERSION", "")
TINY = os.path.join(HERE, "tiny_sweep.yaml")
TINY_CELLS = 6

sys.path.insert(0, HERE)
from cluster import Cluster  # noqa: E402  (this directory's helper)


def clean_env(**extra):
    """The environment without anything that points Python at the sources."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONHOME", "RANKSWEEP_ADDR", "RANKSWEEP_TOKEN")}
    env.update(extra)
    return env


def readme_notebook_lines():
    """The three lines under "## Python" in README.md's first python block."""
    with open(os.path.join(REPO, "README.md")) as f:
        text = f.read()
    section = text[text.index("\n## Python\n"):]
    block = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    return [line for line in block.splitlines() if line.strip()]


class PackageInstallTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="ranksweep-pkg-")
        cls.cluster = None
        try:
            cls.venv = cls.make_venv("venv")
            cls.pip(cls.venv, "install", PYTHON_DIR)
            cls.cluster = Cluster()
            cls.cluster.start()
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def tearDownClass(cls):
        if cls.cluster is not None:
            cls.cluster.stop()
        cls.tmp.cleanup()

    @classmethod
    def make_venv(cls, name):
        path = os.path.join(cls.tmp.name, name)
        subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", path],
                       check=True, timeout=300, cwd=cls.tmp.name, env=clean_env())
        return path

    @classmethod
    def pip(cls, venv, *args):
        # --no-index: everything the install needs is here; a package index
        # is never asked (the build backend needs nothing but the standard
        # library, and the dependencies come from Debian).
        r = subprocess.run([os.path.join(venv, "bin", "python"), "-m", "pip", *args,
                            "--no-index", "--quiet"],
                           capture_output=True, text=True, timeout=300, cwd=cls.tmp.name,
                           env=clean_env())
        if r.returncode != 0:
            raise AssertionError(f"pip {' '.join(args)}: exit {r.returncode}:\n{r.stdout}"
                                 f"{r.stderr}")

    def run_python(self, venv, code, **env):
        """Runs `code` in the venv's interpreter from the temporary directory;
        returns the JSON value its last line of stdout holds."""
        r = subprocess.run([os.path.join(venv, "bin", "python"), "-c", code],
                           capture_output=True, text=True, timeout=300, cwd=self.tmp.name,
                           env=clean_env(**env))
        self.assertEqual(r.returncode, 0, r.stderr)
        return json.loads(r.stdout.strip().splitlines()[-1])

    def test_installs_and_imports_from_the_venv_alone(self):
        got = self.run_python(self.venv, textwrap.dedent("""\
            import importlib.metadata, json, os, sys
            import ranksweep
            from ranksweep.v1 import ranksweep_pb2
            pkg = os.path.dirname(ranksweep.__file__)
            print(json.dumps({"pkg": pkg, "prefix": sys.prefix,
                              "version": importlib.metadata.version("ranksweep"),
                              "files": sorted(os.listdir(pkg)),
                              "v1": sorted(f for f in os.listdir(os.path.join(pkg, "v1"))
                                           if not f.startswith("__pycache__")),
                              "requires": sorted(importlib.metadata.requires("ranksweep"))}))
            """))
        site = os.path.join(got["prefix"], "lib")
        self.assertTrue(got["pkg"].startswith(site + os.sep), got["pkg"])
        self.assertIn(f"{os.sep}site-packages{os.sep}ranksweep", got["pkg"])
        self.assertEqual(got["version"], VERSION)
        self.assertIn("py.typed", got["files"])
        self.assertEqual(got["v1"], ["__init__.py", "ranksweep_pb2.py", "ranksweep_pb2.pyi",
                                     "ranksweep_pb2_grpc.py", "sweep_admin_pb2.py",
                                     "sweep_admin_pb2.pyi", "sweep_admin_pb2_grpc.py"])
        self.assertEqual(got["requires"], ["grpcio>=1.51", "pandas>=1.5", "protobuf>=3.20"])

    def test_readme_notebook_lines_run_a_sweep(self):
        lines = readme_notebook_lines()
        self.assertEqual(len(lines), 3, lines)
        code = "\n".join(lines).replace("examples/demo.yaml", TINY)
        self.assertIn(TINY, code)  # the README names the demo's spec
        got = self.run_python(self.venv, code + textwrap.dedent("""
            import json
            print(json.dumps({"rows": len(df), "states": sorted(set(df["state"])),
                              "sweep": sorted(set(df["sweep_id"]))}))
            """), RANKSWEEP_ADDR=self.cluster.addr)
        self.assertEqual(got["rows"], TINY_CELLS)
        self.assertEqual(got["states"], ["DONE"])
        self.assertEqual(len(got["sweep"]), 1)

    def test_spec_is_the_dict_submit_takes(self):
        # Submitted from the file; spec() is the resolved dict, the same as
        # the CLI's dry run of that file prints, and that dict, submitted
        # in turn, resolves to itself.
        got = self.run_python(self.venv, textwrap.dedent(f"""\
            import json
            import ranksweep
            rs = ranksweep.Client()
            sweep = rs.submit({TINY!r})
            spec = rs.spec(sweep)
            again = rs.submit(spec)
            print(json.dumps({{"spec": spec, "again": rs.spec(again)}}))
            """), RANKSWEEP_ADDR=self.cluster.addr)
        shown = json.loads(self.cluster.cli("submit", "-f", TINY, "--dry-run").stdout)
        self.assertEqual(got["spec"], shown)
        self.assertEqual(got["again"], shown)
        path = os.path.join(self.tmp.name, "spec.json")
        with open(path, "w") as f:
            json.dump(got["spec"], f)
        self.assertEqual(json.loads(self.cluster.cli("submit", "-f", path, "--dry-run").stdout),
                         shown)
        self.assertEqual(shown["dataset"]["num_queries"], 4)
        self.assertEqual(shown["train"]["max_steps"], 300)

    def copy_sources(self, name):
        """python/ and proto/ copied under a new directory; its python/."""
        root = os.path.join(self.tmp.name, name)
        shutil.copytree(PYTHON_DIR, os.path.join(root, "python"),
                        ignore=shutil.ignore_patterns("__pycache__", "v1"))
        shutil.copytree(os.path.join(REPO, "proto"), os.path.join(root, "proto"))
        return os.path.join(root, "python")

    def test_editable_install_uses_the_sources(self):
        sources = self.copy_sources("editable")
        venv = self.make_venv("venv-editable")
        self.pip(venv, "install", "-e", sources)
        got = self.run_python(venv, "import json, ranksweep.v1.ranksweep_pb2 as pb, ranksweep; "
                                    "print(json.dumps([ranksweep.__file__, pb.__file__]))")
        self.assertEqual(got, [os.path.join(sources, "ranksweep", "__init__.py"),
                               os.path.join(sources, "ranksweep", "v1", "ranksweep_pb2.py")])

    def test_sdist_carries_the_proto_and_installs(self):
        sources = self.copy_sources("sdist")
        out = os.path.join(self.tmp.name, "dist")
        os.mkdir(out)
        r = subprocess.run([sys.executable, "-c",
                            "import sys, ranksweep_build; print(ranksweep_build.build_sdist(sys.argv[1]))",
                            out], capture_output=True, text=True, timeout=120,
                           cwd=os.path.join(sources, "build_backend"), env=clean_env())
        self.assertEqual(r.returncode, 0, r.stderr)
        name = r.stdout.strip()
        self.assertEqual(name, f"ranksweep-{VERSION}.tar.gz")
        with tarfile.open(os.path.join(out, name)) as tar:
            members = tar.getnames()
            tar.extractall(out)
        base = f"ranksweep-{VERSION}"
        self.assertIn(f"{base}/proto/ranksweep/v1/ranksweep.proto", members)
        self.assertIn(f"{base}/ranksweep/py.typed", members)
        shutil.rmtree(os.path.dirname(sources))  # no ../proto to fall back on
        venv = self.make_venv("venv-sdist")
        self.pip(venv, "install", os.path.join(out, base))
        got = self.run_python(venv, "import json, ranksweep; "
                                    "print(json.dumps(ranksweep.Client.__name__))")
        self.assertEqual(got, "Client")


if __name__ == "__main__":
    unittest.main()
