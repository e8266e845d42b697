# %% [markdown]
# # ranksweep from Python
#
# The demo sweep (`examples/demo.yaml`: a witness family, a kernel head at every power of two
# from rank 1 to 64, softmax, three seeds) submitted, followed and read back as pandas DataFrames.
#
# Run it cell by cell in an editor that knows `# %%` cells (VS Code, Spyder, JupyterLab with
# jupytext), or whole from the repository root after `./scripts/build` and
# `pip install ./python` (into a venv made with --system-site-packages):
#
#     python3 examples/notebook.py
#
# With `RANKSWEEP_ADDR` set it uses that coordinator (and `RANKSWEEP_TOKEN`, if set). Without,
# the first cell starts a coordinator on a free loopback port with a fresh database, and one
# CPU worker, as `./scripts/demo` does; they stop when the Python process ends.
# `RANKSWEEP_SPEC` submits another spec file instead of the demo's.

# %%
import atexit
import os
import pathlib
import re
import subprocess
import tempfile
import time

import ranksweep

try:
    display  # a notebook shows DataFrames as tables
except NameError:  # a plain script prints them, wide enough for these
    import pandas as pd

    pd.set_option("display.width", 200)
    pd.set_option("display.max_columns", 20)
    display = print

if not os.environ.get("RANKSWEEP_ADDR"):
    bin_dir = os.environ.get("RANKSWEEP_BIN_DIR", "build/bin")
    work = tempfile.mkdtemp(prefix="ranksweep-notebook.")
    with open(f"{work}/ranksweepd.out", "w") as out:
        server = subprocess.Popen(
            [f"{bin_dir}/ranksweepd", "--listen=127.0.0.1:0", f"--db={work}/ranksweep.db",
             "--insecure-local"], stdout=out, stderr=open(f"{work}/ranksweepd.log", "w"))
    for _ in range(300):
        log = pathlib.Path(f"{work}/ranksweepd.out").read_text()
        found = re.search(r"listening on (\S+)", log)
        if found or server.poll() is not None:
            break
        time.sleep(0.1)
    if not found:
        raise RuntimeError(f"ranksweepd did not start; see {work}/ranksweepd.log")
    os.environ["RANKSWEEP_ADDR"] = found.group(1)
    worker = subprocess.Popen(
        [f"{bin_dir}/ranksweep-worker", f"--coordinator={found.group(1)}", "--device=auto",
         "--slots=1"], stdout=subprocess.DEVNULL, stderr=open(f"{work}/worker.log", "w"))
    for proc in (server, worker):  # registered in this order, so the worker stops first
        atexit.register(lambda p=proc: (p.terminate(), p.wait()))
    print(f"ranksweepd on {found.group(1)}; database and logs in {work}")

rs = ranksweep.Client()  # RANKSWEEP_ADDR, RANKSWEEP_TOKEN

# %% [markdown]
# Submit the demo's spec file; the coordinator reads it with the CLI's parser. A dict with
# the same fields works too, and `rs.validate(spec)` says what a submit would make of it
# (cells, size, warnings) without storing anything.

# %%
spec = os.environ.get("RANKSWEEP_SPEC", "examples/demo.yaml")
sweep = rs.submit(spec)
print("submitted", spec, "as", sweep)

# %% [markdown]
# Follow it: one event per cell that changes state, the last one when the sweep ends.

# %%
for p in rs.watch(sweep):
    print(f"{p.done}/{p.total} done, {p.running} running, {p.failed} failed  {p.message}")
if p.state != "DONE":
    raise RuntimeError(f"sweep {sweep} ended {p.state}: {p.recent_failures}")

# %% [markdown]
# One row per (head, rank, seed). `rank` is a nullable integer: `<NA>` for softmax, which has
# no rank. The witness family has no test split, so every `test_*` value is NaN.

# %%
df = rs.results(sweep)
display(df[["head", "rank", "seed", "state", "train_error", "test_error", "steps",
            "wall_seconds"]])

# %%
# The error per head and rank, mean over seeds; softmax's row is the <NA> rank.
display(df.groupby(["rank", "head"], dropna=False)["train_error"].mean().unstack("head"))

# %% [markdown]
# The coordinator's own aggregates: mean, std, min, max and the 95% interval per
# (head, rank), with the seeds still missing; and per head the transition rank (the smallest
# swept rank at which every seed is exact) beside the dataset's theory bounds.

# %%
groups = rs.groups(sweep, by="head,rank")
display(groups[["head", "rank", "n", "expected", "exact_seeds", "train_error_mean",
                 "train_error_ci95", "missing_seeds"]])

# %%
summary = rs.summary(sweep)
display(summary[["head", "transition_rank", "reason", "rank_lower_bound",
                  "rank_upper_bound"]])

# %%
# Error against rank on a log2 axis, one line per ranked head, when matplotlib is installed.
try:
    import matplotlib.pyplot as plt
except ImportError:
    plt = None
if plt is not None:
    ranked = groups.dropna(subset=["rank"])
    fig, ax = plt.subplots()
    for head, g in ranked.groupby("head"):
        ax.errorbar(g["rank"].astype(float), g["train_error_mean"], yerr=g["train_error_ci95"],
                    marker="o", label=head)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("rank")
    ax.set_ylabel("train error")
    ax.legend()

# %%
# The sweeps on this coordinator, newest first, and the workers that ran them.
display(rs.list())
display(rs.workers())
