#!/usr/bin/env python3
"""Static checks of the Dockerfiles under deploy/docker (no container engine).

  check_dockerfiles.py [--repo DIR]
      Every Dockerfile's `build` stage installs exactly the Debian packages of
      scripts/install-deps (the list ./scripts/test builds and tests with),
      either by running scripts/install-deps or by listing them (less the
      exclusions declared below, plus the declared extras). Every runtime
      target installs no compiler and no -dev package, runs as a non-root
      USER, has an ENTRYPOINT, and bakes in no token.

  check_dockerfiles.py [--repo DIR] --bin-dir BUILD/bin
      In addition: for every runtime target with a fixed package list, the
      packages that own the shared libraries its executables load (ldd, on
      this Debian 12 machine's build) are installed by that list or its
      dependencies. Needs dpkg and the built executables.

Exits 0 when everything holds, 1 with one line per problem otherwise.
"""

import argparse
import os
import re
import shlex
import subprocess
import sys

# Per Dockerfile: packages of scripts/install-deps it may leave out of its
# build stage, and packages it may add there, each with the reason.
POLICY = {
    "Dockerfile.cuda": {
        "exclude": {
            "libtorch-dev": "a CUDA LibTorch replaces Debian's CPU one",
            "libopenblas0-openmp": "Debian's CPU LibTorch needs it; a CUDA LibTorch brings its own BLAS",
        },
        "extra": {
            "ca-certificates": "fetch LibTorch over HTTPS",
            "curl": "fetch LibTorch",
            "unzip": "unpack the LibTorch zip",
            "python3": "torch.utils.cmake_prefix_path of a pip/base-image torch",
            "python3-venv": "pip install of the torch wheel",
        },
    },
}

# Nothing that compiles, and no headers, in a runtime image.
FORBIDDEN_RUNTIME = re.compile(
    r"^(build-essential|gcc(-\d+)?|g\+\+(-\d+)?|cpp(-\d+)?|clang.*|llvm.*|make|cmake|"
    r"ninja-build|protobuf-compiler.*|nvidia-cuda-toolkit|cuda-toolkit.*|cuda-nvcc.*|.*-dev)$")


class Stage:
    def __init__(self, index, base, name):
        self.index = index
        self.base = base
        self.name = name or str(index)
        self.instructions = []  # (keyword, argument text)

    def __repr__(self):
        return self.name


def parse_dockerfile(path):
    """Returns the stages of a Dockerfile with their instructions."""
    logical, current = [], ""
    with open(path, encoding="utf-8") as f:
        for raw in f:
            line = raw.rstrip("\n")
            if line.lstrip().startswith("#"):
                continue  # comments, also inside continued instructions
            if line.rstrip().endswith("\\"):
                current += line.rstrip()[:-1] + " "
                continue
            current += line
            if current.strip():
                logical.append(current.strip())
            current = ""
    if current.strip():
        logical.append(current.strip())

    stages = []
    for text in logical:
        keyword, _, rest = text.partition(" ")
        keyword = keyword.upper()
        rest = rest.strip()
        if keyword == "FROM":
            words = [w for w in rest.split() if not w.startswith("--")]
            name = words[2] if len(words) >= 3 and words[1].lower() == "as" else None
            stages.append(Stage(len(stages), words[0], name))
        elif stages:
            stages[-1].instructions.append((keyword, rest))
    return stages


def shell_commands(run_text):
    """Splits a RUN's shell text into simple commands, each a token list."""
    try:
        lexer = shlex.shlex(run_text, posix=True, punctuation_chars=";&|()")
        lexer.whitespace_split = True
        tokens = list(lexer)
    except ValueError:
        tokens = run_text.split()
    commands, current = [], []
    for token in tokens:
        if token and set(token) <= set(";&|()"):
            if current:
                commands.append(current)
            current = []
        else:
            current.append(token)
    if current:
        commands.append(current)
    return commands


def apt_installs(run_text):
    """Yields (packages, dynamic) for every apt-get/apt install in a RUN."""
    for cmd in shell_commands(run_text):
        cmd = without_assignments(cmd)
        for i, token in enumerate(cmd):
            if os.path.basename(token) in ("apt-get", "apt") and "install" in cmd[i + 1:]:
                j = cmd.index("install", i + 1)
                packages = [t for t in cmd[j + 1:] if not t.startswith("-")]
                dynamic = cmd[0] == "xargs" or any("$(" in t or "`" in t for t in cmd)
                yield packages, dynamic
                break


def without_assignments(cmd):
    """Drops the leading VAR=value words of a simple command."""
    i = 0
    while i < len(cmd) and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", cmd[i]):
        i += 1
    return cmd[i:]


def runs_install_deps(run_text):
    for cmd in shell_commands(run_text):
        words = without_assignments(cmd)
        if words and words[0].endswith("scripts/install-deps"):
            return True
    return False


def install_deps_packages(repo):
    path = os.path.join(repo, "scripts", "install-deps")
    with open(path, encoding="utf-8") as f:
        text = f.read()
    m = re.search(r"^PACKAGES=\((.*?)^\)", text, re.S | re.M)
    if not m:
        raise SystemExit(f"FAIL: no PACKAGES=( ... ) array in {path}")
    body = "\n".join(line.split("#", 1)[0] for line in m.group(1).splitlines())
    packages = body.split()
    if not packages:
        raise SystemExit(f"FAIL: empty PACKAGES array in {path}")
    return packages


def chain(stage, by_name):
    """The stage and the stages it is built FROM, nearest first."""
    out, seen = [], set()
    while stage is not None and stage.name not in seen:
        seen.add(stage.name)
        out.append(stage)
        stage = by_name.get(stage.base)
    return out


def runtime_targets(stages):
    used_as_base = {s.base for s in stages}
    return [s for s in stages if s.name != "build" and s.name not in used_as_base]


class Checker:
    def __init__(self):
        self.problems = []
        self.checked = []

    def fail(self, msg):
        self.problems.append(msg)

    def ok(self, msg):
        self.checked.append(msg)


def check_build_stage(checker, rel, stages, wanted):
    by_name = {s.name: s for s in stages}
    build = by_name.get("build")
    if build is None:
        checker.fail(f"{rel}: no stage named `build`")
        return
    policy = POLICY.get(os.path.basename(rel), {})
    exclude, extra = policy.get("exclude", {}), policy.get("extra", {})
    runs_script = False
    installed = []
    for keyword, text in build.instructions:
        if keyword != "RUN":
            continue
        runs_script |= runs_install_deps(text)
        for packages, dynamic in apt_installs(text):
            if dynamic:
                checker.fail(f"{rel}: build stage installs a computed package list; list them")
            installed += packages
    if runs_script:
        copies = any(k in ("COPY", "ADD") and "scripts/install-deps" in t
                     for k, t in build.instructions) or any(
                         k == "COPY" and re.match(r"^(--\S+\s+)*\.\s", t) for k, t in build.instructions)
        if not copies:
            checker.fail(f"{rel}: build stage runs scripts/install-deps without copying it in")
        if installed:
            checker.fail(f"{rel}: build stage runs scripts/install-deps and also installs {sorted(installed)}")
        else:
            checker.ok(f"{rel}: build stage runs scripts/install-deps ({len(wanted)} packages)")
    else:
        expected = set(wanted) - set(exclude)
        have = set(installed)
        missing = sorted(expected - have)
        unexpected = sorted(have - expected - set(extra))
        stale = sorted(set(exclude) - set(wanted))
        if missing:
            checker.fail(f"{rel}: build stage lacks packages of scripts/install-deps: {' '.join(missing)}")
        if unexpected:
            checker.fail(f"{rel}: build stage installs packages not in scripts/install-deps "
                         f"(nor declared extras in {os.path.basename(__file__)}): {' '.join(unexpected)}")
        if stale:
            checker.fail(f"{rel}: declared exclusions no longer in scripts/install-deps: {' '.join(stale)}")
        if not (missing or unexpected or stale):
            why = "; ".join(f"without {p} ({r})" for p, r in exclude.items())
            checker.ok(f"{rel}: build stage installs the {len(expected)} packages of scripts/install-deps"
                       + (f", {why}" if why else "")
                       + (f", plus {' '.join(sorted(have & set(extra)))}" if have & set(extra) else ""))
    if not any(k == "RUN" and "RANKSWEEP_BUILD_TESTS=OFF" in t for k, t in build.instructions):
        checker.fail(f"{rel}: build stage does not configure with -DRANKSWEEP_BUILD_TESTS=OFF")


def check_no_tokens(checker, rel, stages):
    """No stage, the build stage included (its layers sit in caches and
    registries too), takes a token as ARG/ENV or copies one in."""
    bad = False
    for s in stages:
        for keyword, text in s.instructions:
            if keyword in ("ARG", "ENV") and re.search(r"TOKEN", text, re.I) \
                    and not re.search(r"TOKEN_FILE", text, re.I):
                checker.fail(f"{rel}: `{keyword} {text}` in stage `{s.name}`: tokens never go into an image")
                bad = True
            if keyword in ("COPY", "ADD") and re.search(r"secrets|token", text, re.I):
                checker.fail(f"{rel}: `{keyword} {text}` in stage `{s.name}` copies a secret into the image")
                bad = True
    if not bad:
        checker.ok(f"{rel}: no stage takes a token as ARG/ENV or copies one in")


def check_runtime_stage(checker, rel, stage, by_name):
    stages = chain(stage, by_name)
    if any(s.name == "build" for s in stages):
        checker.fail(f"{rel}: runtime target `{stage.name}` is built FROM the build stage")
    user = None
    entrypoint = False
    packages = []
    for s in reversed(stages):  # base first, so later USERs win
        for keyword, text in s.instructions:
            if keyword == "USER":
                user = text.split(":", 1)[0].strip()
            elif keyword == "ENTRYPOINT":
                entrypoint = True
            elif keyword == "RUN":
                for pkgs, _dynamic in apt_installs(text):
                    packages += pkgs
    bad = sorted(p for p in packages if FORBIDDEN_RUNTIME.match(p))
    if bad:
        checker.fail(f"{rel}: runtime target `{stage.name}` installs build tools: {' '.join(bad)}")
    if user is None or user in ("root", "0"):
        checker.fail(f"{rel}: runtime target `{stage.name}` runs as {user or 'root (no USER)'}")
    if not entrypoint:
        checker.fail(f"{rel}: runtime target `{stage.name}` has no ENTRYPOINT")
    if not bad and user not in (None, "root", "0") and entrypoint:
        checker.ok(f"{rel}: target `{stage.name}`: no compiler or -dev package, USER {user}, ENTRYPOINT set")


# --- runtime libraries (--bin-dir) -------------------------------------------

def strip_dep(dep):
    dep = re.sub(r"\(.*?\)", "", dep)
    dep = re.sub(r"\[.*?\]", "", dep)
    return dep.strip().split(":", 1)[0]


def installed_packages():
    out = subprocess.run(
        ["dpkg-query", "-W", "-f",
         "${Package}\t${Status}\t${Priority}\t${Essential}\t${Pre-Depends}\t${Depends}\t${Provides}\n"],
        check=True, capture_output=True, text=True).stdout
    info, provides = {}, {}
    for line in out.splitlines():
        name, status, priority, essential, pre, deps, prov = (line.split("\t") + [""] * 7)[:7]
        if "installed" not in status.split():
            continue
        groups = [[strip_dep(a) for a in g.split("|")] for g in (pre + "," + deps).split(",") if g.strip()]
        info[name] = {"base": priority == "required" or essential == "yes", "groups": groups}
        for p in prov.split(","):
            if p.strip():
                provides.setdefault(strip_dep(p), []).append(name)
    return info, provides


def closure(roots, info, provides):
    seen, todo = set(), list(roots)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for group in info.get(name, {}).get("groups", []):
            for alt in group:  # the first alternative present is what apt picks
                if alt in info:
                    todo.append(alt)
                    break
                if alt in provides:
                    todo.append(provides[alt][0])
                    break
    return seen


def check_runtime_libs(checker, repo, rel, stage, by_name, bin_dir, info, provides):
    stages = chain(stage, by_name)
    packages, dynamic, binaries = [], False, []
    for s in stages:
        for keyword, text in s.instructions:
            if keyword == "RUN":
                for pkgs, dyn in apt_installs(text):
                    packages += pkgs
                    dynamic |= dyn
            if keyword == "COPY" and "--from=build" in text:
                srcs = [w for w in text.split() if not w.startswith("--")][:-1]
                binaries += [os.path.basename(w) for w in srcs if "/bin/" in w]
    if dynamic:
        checker.ok(f"{rel}: target `{stage.name}` derives its runtime packages from ldd at build time")
        return
    if not binaries:
        return
    paths = [os.path.join(bin_dir, b) for b in binaries]
    absent = [p for p in paths if not os.path.isfile(p)]
    if absent:
        checker.fail(f"{rel}: target `{stage.name}` copies executables not built in {bin_dir}: "
                     + " ".join(os.path.basename(p) for p in absent))
        return
    helper = os.path.join(repo, "deploy", "docker", "runtime-packages.sh")
    res = subprocess.run(["sh", helper] + paths, capture_output=True, text=True)
    if res.returncode != 0:
        checker.fail(f"{rel}: runtime-packages.sh failed on {' '.join(binaries)}: {res.stderr.strip()}")
        return
    needed = set(res.stdout.split())
    unknown = sorted(p for p in packages if p not in info)
    if unknown:
        checker.fail(f"{rel}: target `{stage.name}` installs packages not installed on this machine, "
                     f"cannot check them: {' '.join(unknown)}")
    base = {n for n, i in info.items() if i["base"]}
    have = closure(set(packages) | base, info, provides)
    missing = sorted(needed - have)
    if missing:
        checker.fail(f"{rel}: target `{stage.name}`: {' '.join(binaries)} load libraries of packages "
                     f"its apt-get install does not bring in: {' '.join(missing)}")
    else:
        checker.ok(f"{rel}: target `{stage.name}`: the {len(needed)} library packages that "
                   f"{' '.join(binaries)} load are installed")


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repo", default=os.path.normpath(os.path.join(here, "..", "..")))
    ap.add_argument("--bin-dir", help="build/bin with ranksweepd, ranksweep, ranksweep-worker, ranksweep-train")
    args = ap.parse_args()

    docker_dir = os.path.join(args.repo, "deploy", "docker")
    dockerfiles = sorted(f for f in os.listdir(docker_dir) if f.startswith("Dockerfile"))
    if not dockerfiles:
        print(f"FAIL: no Dockerfile in {docker_dir}")
        return 1
    wanted = install_deps_packages(args.repo)
    print(f"scripts/install-deps PACKAGES ({len(wanted)}): {' '.join(wanted)}")

    checker = Checker()
    info = provides = None
    if args.bin_dir:
        info, provides = installed_packages()
    for name in dockerfiles:
        rel = os.path.join("deploy", "docker", name)
        stages = parse_dockerfile(os.path.join(docker_dir, name))
        by_name = {s.name: s for s in stages}
        check_build_stage(checker, rel, stages, wanted)
        check_no_tokens(checker, rel, stages)
        targets = runtime_targets(stages)
        if not targets:
            checker.fail(f"{rel}: no runtime target")
        for stage in targets:
            check_runtime_stage(checker, rel, stage, by_name)
            if args.bin_dir:
                check_runtime_libs(checker, args.repo, rel, stage, by_name, args.bin_dir, info, provides)

    for line in checker.checked:
        print(f"ok: {line}")
    for line in checker.problems:
        print(f"FAIL: {line}")
    print(f"{len(checker.checked)} checks passed, {len(checker.problems)} failed")
    return 1 if checker.problems else 0


if __name__ == "__main__":
    sys.exit(main())
