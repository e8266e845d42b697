"""The PEP 517 build backend of the `ranksweep` Python package.

`pip install ./python` (and `pip install -e ./python`) call this module; it
generates the package's gRPC modules from proto/ranksweep/v1/ranksweep.proto
with `protoc` and `grpc_python_plugin` (Debian: protobuf-compiler and
protobuf-compiler-grpc), so that the protobuf runtime the package meets is
the one its modules were made for and nothing generated lives in the
repository.

Why a backend of our own: it needs nothing but the standard library, so pip's
isolated build environment has nothing to download and the install works on
a machine without a package index (a cluster node, CI); setuptools would have
to be fetched into that environment, or `--no-build-isolation` be given.

What it writes:
  * wheel:    ranksweep/*.py, ranksweep/py.typed, ranksweep/v1/ (generated:
              ranksweep_pb2.py with its type stub ranksweep_pb2.pyi, and
              ranksweep_pb2_grpc.py) and the .dist-info (METADATA from
              pyproject.toml's [project], WHEEL, RECORD);
  * sdist:    pyproject.toml, README.md, build_backend/, ranksweep/ and
              proto/ranksweep/v1/ranksweep.proto, so it builds elsewhere;
  * editable: the generated modules into ranksweep/v1/ of the source tree
              (ignored by git) and a .pth file naming the source tree.

Environment: PROTOC and GRPC_PYTHON_PLUGIN name the tools when they are not
on PATH. Errors are raised as RuntimeError naming what is missing.
"""

import base64
import hashlib
import io
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile

try:
    import tomllib
except ImportError:  # Python < 3.11: pyproject.toml lists tomli for them
    import tomli as tomllib  # type: ignore[no-redef]

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)  # python/
PROTO_DIR = "ranksweep/v1"
PROTO_NAME = f"{PROTO_DIR}/ranksweep.proto"  # the one every other imports
# The sdist's fixed time stamp: the archive's bytes depend on its files only.
_EPOCH = 315532800  # 1980-01-01, the earliest a zip can hold


def _project():
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        return tomllib.load(f)["project"]


def _dist_name(project):
    return project["name"].replace("-", "_")


def _proto_root():
    """The folder holding ranksweep/v1/ranksweep.proto: the repository's
    proto/ beside python/, else (an unpacked sdist) python/proto/."""
    for root in (os.path.join(os.path.dirname(ROOT), "proto"), os.path.join(ROOT, "proto")):
        if os.path.isfile(os.path.join(root, PROTO_NAME)):
            return root
    raise RuntimeError(f"ranksweep: {PROTO_NAME} not found under ../proto or ./proto of {ROOT}")


def _tool(env, name, package):
    path = os.environ.get(env) or shutil.which(name)
    if not path:
        raise RuntimeError(f"ranksweep: `{name}` is needed to generate the gRPC modules; "
                           f"install {package} (Debian) or set {env}")
    return path


def _proto_names(root):
    """Every .proto of ranksweep/v1 under `root`, as protoc names them."""
    folder = os.path.join(root, PROTO_DIR)
    return [f"{PROTO_DIR}/{n}" for n in sorted(os.listdir(folder)) if n.endswith(".proto")]


def generate(out_dir):
    """Writes ranksweep/v1/__init__.py and, per proto file NAME.proto of
    proto/ranksweep/v1, NAME_pb2.py, NAME_pb2.pyi and NAME_pb2_grpc.py under
    `out_dir`."""
    protoc = _tool("PROTOC", "protoc", "protobuf-compiler")
    plugin = _tool("GRPC_PYTHON_PLUGIN", "grpc_python_plugin", "protobuf-compiler-grpc")
    os.makedirs(os.path.join(out_dir, "ranksweep", "v1"), exist_ok=True)
    root = _proto_root()
    cmd = [protoc, f"--proto_path={root}", f"--python_out={out_dir}",
           f"--pyi_out={out_dir}", f"--grpc_python_out={out_dir}",
           f"--plugin=protoc-gen-grpc_python={plugin}", *_proto_names(root)]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"ranksweep: {' '.join(cmd)} failed:\n{done.stderr}")
    with open(os.path.join(out_dir, "ranksweep", "v1", "__init__.py"), "w") as f:
        f.write('"""Generated from proto/ranksweep/v1/ranksweep.proto at build time."""\n')


def _metadata(project):
    lines = ["Metadata-Version: 2.1", f"Name: {project['name']}",
             f"Version: {project['version']}"]
    if "description" in project:
        lines.append(f"Summary: {project['description']}")
    if "requires-python" in project:
        lines.append(f"Requires-Python: {project['requires-python']}")
    for dep in project.get("dependencies", []):
        lines.append(f"Requires-Dist: {dep}")
    return "\n".join(lines) + "\n"


def _package_files():
    """(path in the wheel, path on disk) of the package's own sources."""
    pkg = os.path.join(ROOT, "ranksweep")
    for name in sorted(os.listdir(pkg)):
        if name.endswith(".py") or name == "py.typed":
            yield f"ranksweep/{name}", os.path.join(pkg, name)


def _record_line(arcname, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{arcname},sha256={digest},{len(data)}"


def _write_wheel(wheel_directory, files):
    """A py3-none-any wheel of `files` ((arcname, bytes)), with its dist-info."""
    project = _project()
    dist = f"{_dist_name(project)}-{project['version']}"
    info = f"{dist}.dist-info"
    files = list(files) + [
        (f"{info}/METADATA", _metadata(project).encode()),
        (f"{info}/WHEEL", b"Wheel-Version: 1.0\nGenerator: ranksweep_build\n"
                          b"Root-Is-Purelib: true\nTag: py3-none-any\n"),
    ]
    record = [_record_line(name, data) for name, data in files] + [f"{info}/RECORD,,"]
    files.append((f"{info}/RECORD", ("\n".join(record) + "\n").encode()))
    filename = f"{dist}-py3-none-any.whl"
    with zipfile.ZipFile(os.path.join(wheel_directory, filename), "w",
                         zipfile.ZIP_DEFLATED) as whl:
        for name, data in files:
            whl.writestr(zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0)), data,
                         zipfile.ZIP_DEFLATED)
    return filename


def _read(path):
    with open(path, "rb") as f:
        return f.read()


# ---------------------------------------------------------------- PEP 517

def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    files = [(arc, _read(path)) for arc, path in _package_files()]
    with tempfile.TemporaryDirectory() as tmp:
        generate(tmp)
        v1 = os.path.join(tmp, "ranksweep", "v1")
        for name in sorted(os.listdir(v1)):
            files.append((f"ranksweep/v1/{name}", _read(os.path.join(v1, name))))
    return _write_wheel(wheel_directory, files)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    # The sources stay where they are; their generated modules are written
    # beside them (python/ranksweep/v1/, ignored by git) and made again by
    # the next `pip install -e`.
    generate(ROOT)
    project = _project()
    pth = (f"{_dist_name(project)}.pth", (ROOT + "\n").encode())
    return _write_wheel(wheel_directory, [pth])


def build_sdist(sdist_directory, config_settings=None):
    project = _project()
    base = f"{_dist_name(project)}-{project['version']}"
    root = _proto_root()
    members = [("pyproject.toml", os.path.join(ROOT, "pyproject.toml")),
               ("README.md", os.path.join(ROOT, "README.md")),
               ("build_backend/ranksweep_build.py", os.path.abspath(__file__))]
    members += [(f"proto/{name}", os.path.join(root, name)) for name in _proto_names(root)]
    members += list(_package_files())
    filename = f"{base}.tar.gz"
    with tarfile.open(os.path.join(sdist_directory, filename), "w:gz",
                      format=tarfile.PAX_FORMAT) as tar:
        pkg_info = _metadata(project).encode()
        for arc, data in [("PKG-INFO", pkg_info)] + [(a, _read(p)) for a, p in members]:
            entry = tarfile.TarInfo(f"{base}/{arc}")
            entry.size = len(data)
            entry.mtime = _EPOCH
            entry.mode = 0o644
            tar.addfile(entry, io.BytesIO(data))
    return filename


if __name__ == "__main__":  # `python3 ranksweep_build.py OUT`: the modules alone
    generate(sys.argv[1] if len(sys.argv) > 1 else ".")
