#!/usr/bin/python3
"""check_file_references.py on small made-up trees: what it reports, and what
it leaves alone (so that it can fail, and fails only where it should)."""

import os
import subprocess
import sys
import tempfile
import unittest

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "check_file_references.py")


def run_on(tree):
    """Writes `tree` ({path: text}) into a fresh folder (not a git checkout)
    and runs the checker on it: (exit status, problem lines)."""
    with tempfile.TemporaryDirectory() as root:
        for path, text in tree.items():
            full = os.path.join(root, path)
            os.makedirs(os.path.dirname(full), exist_ok=True)
            with open(full, "w", encoding="utf-8") as f:
                f.write(text)
        out = subprocess.run([sys.executable, SCRIPT, "--repo", root],
                             capture_output=True, text=True)
        lines = out.stdout.splitlines()
        return out.returncode, [l for l in lines if ": cites " in l]


BASE = {
    "README.md": "# Demo\n",
    "docs/GUIDE.md": "# Guide\n\n## 2. Setting up (quick)\n\n* **Why it works.** text\n",
    "worker/heads.h": "// heads\n",
    "worker/heads_test.cc": "// test\n",
    "tests/check.py": "# check\n",
    "examples/presets/a.yaml": "name: a\n",
}


class CheckFileReferencesTest(unittest.TestCase):
    def test_a_tree_that_cites_only_its_own_files_passes(self):
        tree = dict(BASE)
        tree["docs/USE.md"] = (
            "See docs/GUIDE.md, \"Setting up\" and `worker/heads.h`; the test is\n"
            "heads_test.cc, the overview ../README.md (GUIDE.md, \"Why it\n"
            "works\"). Run ./tests/check.py.\n")
        tree["worker/heads.cc"] = (
            "#include \"worker/heads.h\"\n#include <torch/torch.h>\n"
            "// docs/GUIDE.md, section \"Setting up (quick)\"\n")
        code, problems = run_on(tree)
        self.assertEqual(problems, [])
        self.assertEqual(code, 0)

    def test_every_kind_of_missing_citation_is_reported_with_its_line(self):
        tree = dict(BASE)
        tree["docs/USE.md"] = (
            "intro\n"
            "The science is in docs/SCIENCE.md.\n"
            "See fused_trainer_test.cc and ../MISSING.md.\n"
            "Background: /srv/notes/NOTES.md.\n"
            "As in docs/GUIDE.md, \"Tearing\n"
            "down\".\n")
        tree["worker/heads.cc"] = "// (SCIENCE.md, \"Metrics\")\n"
        tree["CMakeLists.txt"] = "add_test(NAME x COMMAND ${PROJECT_SOURCE_DIR}/tests/gone.py)\n"
        code, problems = run_on(tree)
        self.assertEqual(code, 1)
        self.assertEqual(problems, [
            "CMakeLists.txt:1: cites tests/gone.py, which is not in the repository",
            "docs/USE.md:2: cites docs/SCIENCE.md, which is not in the repository",
            "docs/USE.md:3: cites fused_trainer_test.cc, which is not in the repository",
            "docs/USE.md:3: cites ../MISSING.md, which is not in the repository",
            "docs/USE.md:4: cites /srv/notes/NOTES.md, a document outside the repository",
            "docs/USE.md:5: cites section \"Tearing down\" of docs/GUIDE.md, "
            "which has no such heading",
            "worker/heads.cc:1: cites SCIENCE.md, which is not in the repository",
        ])

    def test_other_libraries_urls_commands_and_generated_files_are_left_alone(self):
        tree = dict(BASE)
        tree["worker/heads.cc"] = (
            "#include \"absl/status/status.h\"\n"
            "#include \"ranksweep_build_id.h\"\n"
            "// LibTorch's c10/cuda/impl/cuda_cmake_macros.h and CUDAGraph.h\n"
            "// generated: ranksweep/v1/ranksweep.grpc.pb.h, presets_data.cc\n")
        tree["docs/USE.md"] = (
            "ranksweep submit -f sweep.yaml; ranksweep-train --sweep sweep.json\n"
            "https://example.org/docs/OTHER.md and build/bin/x.md\n"
            "cp \"$tmp/spec.json\" \"$WORK/notes.md\"; ${GEN}/out/file.h\n"
            "examples/presets/NAME.yaml\n")
        code, problems = run_on(tree)
        self.assertEqual(problems, [])
        self.assertEqual(code, 0)


if __name__ == "__main__":
    unittest.main()
