#!/usr/bin/python3
"""`ranksweep ui` in a real browser, against a real coordinator and worker.

Starts ranksweepd (temporary SQLite file, a free loopback port), submits two
small sweeps with the CLI, starts `ranksweep ui` on a free port and drives
headless Chromium through Selenium over every page, asserting on what a
person sees: live progress reaching DONE on an open page (pushed by
Server-Sent Events: the worker starts only after the page is open), the
exact number of rows in the per-seed table, one plot line per head (per head
and recipe for a sweep with an lr axis, whose rows show their lr), a column
that sorts on a click, filters and downloads, two sweeps overlaid on the
compare page (with the settings that differ between them), the worker on the
workers page, and after a quarantine of that worker the invalidated rows: out
of the plot and the summary, listed (marked INVALID) only when asked for.
Then what a page does when the coordinator goes away: a sweep page open
across a coordinator restart is marked stale and then shows the state
`ranksweep status` shows; pages loaded while it is down say so, and show the
data once it is back. Then managing sweeps: a viewer is refused; the browser
that opened the manage link notes, tags, renames, archives, cancels, retries
and deletes (after typing the id); a cell a worker failed three times is
listed with its reason, and retried from the page; the sweep list searches and filters by
state, tag and owner; a legend entry hides its line; the metric and the log
scale are choices. Screenshots of every page go to --out.

Exit codes: 0 pass, 1 fail, 77 skip (no Chromium or ChromeDriver installed).
"""
import argparse
import csv
import io
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

SKIP = 77

# Exhaustive m=2, N=3 (64 sequences): a kernel head at three ranks and
# softmax, three seeds: 3 x 3 + 3 = 12 cells, about a second each on a core.
SWEEP_A = {
    "name": "ui-demo",
    "dataset": {"kind": "exhaustive", "m": 2, "seq_len": 3},
    "heads": [{"kind": "kernel", "feature_map": "elu1"}, {"kind": "softmax"}],
    "ranks": [1, 2, 4],
    "seed_count": 3,
    "train": {"max_steps": 300, "eval_every": 50, "lr": 0.02},
}
CELLS_A = 12
HEADS_A = ["kernel/elu1", "softmax"]
# A second sweep for the compare page, on a dataset with a test split (so
# its page draws a train and a test line): one head, two ranks, two seeds.
SWEEP_B = {
    "name": "ui-compare",
    "dataset": {"kind": "pool", "m": 8, "seq_len": 3, "weight": 3, "pool_size": 40,
                "test_pool_share": 0.25, "train_size": 200, "test_size": 50, "hard_share": 0.5},
    "heads": [{"kind": "kernel", "feature_map": "relu_eps"}],
    "ranks": [1, 4],
    "seed_count": 2,
    "train": {"max_steps": 200, "eval_every": 50, "lr": 0.03},
}
CELLS_B = 4
# A sweep with an lr axis: two recipes (lr 0.02 and 0.005) of a kernel head at
# two ranks, two seeds: 2 x 2 x 2 = 8 cells; its page draws a line per
# (head, recipe) and lists the lr of every row.
# Sweeps for the restart and the actions: no worker is running when they are
# submitted; 2 cells each.
SWEEP_D = {
    "name": "ui-restart",
    "dataset": {"kind": "exhaustive", "m": 2, "seq_len": 3},
    "heads": [{"kind": "kernel", "feature_map": "elu1"}],
    "ranks": [1, 2],
    "seed_count": 1,
    "train": {"max_steps": 100, "eval_every": 50, "lr": 0.02},
}
CELLS_D = 2
# Not SWEEP_D again: the result cache would serve it, done at once.
SWEEP_E = dict(SWEEP_D, name="ui-manage", train=dict(SWEEP_D["train"], lr=0.01))
CELLS_E = 2
# A sweep whose one cell a worker fails every time it runs it (the fake
# worker's --fail-tasks): FAILED after the coordinator's 3 attempts.
SWEEP_F = dict(SWEEP_D, name="ui-fails", ranks=[1], train=dict(SWEEP_D["train"], lr=0.007))
SWEEP_C = {
    "name": "ui-recipes",
    "dataset": {"kind": "exhaustive", "m": 2, "seq_len": 3},
    "heads": [{"kind": "kernel", "feature_map": "elu1"}],
    "ranks": [1, 2],
    "seed_count": 2,
    "train": {"max_steps": 200, "eval_every": 50, "lr": [0.02, 0.005]},
}
CELLS_C = 8


class Failure(Exception):
    pass


def check(condition, message):
    if not condition:
        raise Failure(message)


class Proc:
    """A child process whose stdout lines are collected on a thread."""

    def __init__(self, argv, log_path, env=None):
        self.argv = argv
        self.log = open(log_path + ".stderr", "w")
        self.lines = []
        self.cond = threading.Condition()
        full_env = dict(os.environ)
        full_env.update(env or {})
        self.p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=self.log, text=True,
                                  env=full_env)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.p.stdout:
            with self.cond:
                self.lines.append(line.rstrip("\n"))
                self.cond.notify_all()

    def wait_for_line(self, pattern, timeout):
        regex = re.compile(pattern)
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                for line in self.lines:
                    m = regex.search(line)
                    if m:
                        return m.group(1)
                left = deadline - time.monotonic()
                if left <= 0 or self.p.poll() is not None and not self.reader.is_alive():
                    raise Failure(f"{self.argv[0]}: no line matching {pattern!r} in {timeout} s; "
                                  f"stdout: {self.lines}")
                self.cond.wait(min(left, 0.5))

    def stop(self):
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
            try:
                self.p.wait(20)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
        self.log.close()
        return self.p.returncode


def find_browser():
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    return chromium, driver


def http_get(url, headers=None, data=None):
    req = urllib.request.Request(url, headers=headers or {}, data=data)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, dict(r.headers), r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read().decode()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin-dir", required=True)
    ap.add_argument("--out", required=True, help="folder for the screenshots")
    args = ap.parse_args()

    chromium, chromedriver = find_browser()
    if chromium is None or chromedriver is None:
        print("SKIP: chromium or chromedriver is not installed (scripts/install-deps installs "
              "them)")
        return SKIP
    # Selenium comes with them from scripts/install-deps: missing is a failure.
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.common.exceptions import (NoSuchElementException,
                                            StaleElementReferenceException, TimeoutException)
    from selenium.webdriver.support.ui import Select, WebDriverWait

    os.makedirs(args.out, exist_ok=True)
    stale = os.path.join(args.out, "failure.png")
    if os.path.exists(stale):
        os.remove(stale)
    work = tempfile.mkdtemp(prefix="ranksweep-ui-test-")
    bin_dir = args.bin_dir
    procs = []
    driver = None
    try:
        server = Proc([f"{bin_dir}/ranksweepd", "--listen=127.0.0.1:0", f"--db={work}/rs.db",
                       "--insecure_local"], f"{work}/server")
        procs.append(server)
        addr = server.wait_for_line(r"listening on (\S+)", 30)

        def stop_server():
            check(server.stop() == 0, f"ranksweepd exited {server.p.returncode} after SIGTERM")
            procs.remove(server)

        def start_server():
            # The same address and database: a restart.
            nonlocal server
            server = Proc([f"{bin_dir}/ranksweepd", f"--listen={addr}", f"--db={work}/rs.db",
                           "--insecure_local"], f"{work}/server-again")
            procs.append(server)
            server.wait_for_line(r"listening on (\S+)", 30)

        def cli(*argv, stdin=None):
            r = subprocess.run([f"{bin_dir}/ranksweep", f"--addr={addr}", *argv], input=stdin,
                               capture_output=True, text=True, timeout=60)
            return r

        # A dashboard that would serve other machines is refused unless asked for.
        r = cli("ui", "--listen", "0.0.0.0:0")
        check(r.returncode == 1, f"ui --listen 0.0.0.0:0 exited {r.returncode}, want 1")
        check("not a loopback address" in r.stderr and "--allow-remote" in r.stderr, r.stderr)

        ids = []
        for spec in (SWEEP_A, SWEEP_B):
            r = cli("submit", "-f", "-", stdin=json.dumps(spec))
            check(r.returncode == 0, f"submit: {r.stderr}")
            ids.append(r.stdout.strip())
        sweep_a, sweep_b = ids

        ui = Proc([f"{bin_dir}/ranksweep", f"--addr={addr}", "ui", "--listen", "127.0.0.1:0"],
                  f"{work}/ui")
        procs.append(ui)
        base = ui.wait_for_line(r"dashboard at (http://\S+/)", 30)
        manage_link = ui.wait_for_line(r"manage sweeps at (http://\S+#key=[0-9a-f]{64}) ", 30)
        key = manage_link.rsplit("=", 1)[1]

        # Requests naming another host (DNS rebinding) are refused.
        port = base.rstrip("/").rsplit(":", 1)[1]
        status, _, body = http_get(base + "api/sweeps", {"Host": f"attacker.example:{port}"})
        check(status == 403, f"foreign Host: status {status}, want 403: {body}")

        options = webdriver.ChromeOptions()
        options.binary_location = chromium
        for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--window-size=1360,1500", "--force-device-scale-factor=1"):
            options.add_argument(flag)
        options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        # Chromium's profile and its singleton-socket folder live in the
        # work folder, which is removed at the end: nothing is left in /tmp.
        options.add_argument(f"--user-data-dir={work}/chromium-profile")
        browser_env = dict(os.environ, TMPDIR=work)
        driver = webdriver.Chrome(service=Service(chromedriver, log_path=f"{work}/chromedriver.log",
                                                  env=browser_env),
                                  options=options)
        # Pages redraw on their own (loads, live events): an element found
        # may be gone by the time it is read, and is found again.
        wait = WebDriverWait(driver, 60, ignored_exceptions=(StaleElementReferenceException,))

        def text_now(element_id):
            try:
                return driver.find_element(By.ID, element_id).text
            except (NoSuchElementException, StaleElementReferenceException):
                return None

        def click(element_id):
            # A button that a redraw may replace between find and click (the
            # manage buttons are drawn again when the sweep's state changes):
            # found and clicked again until one click lands.
            wait.until(lambda d: d.find_element(By.ID, element_id).click() or True)

        def text_of(element_id):
            # The text of an element that a redraw may replace under us: read
            # again (a few times) when it went stale between find and read.
            for _ in range(50):
                try:
                    return driver.find_element(By.ID, element_id).text
                except StaleElementReferenceException:
                    time.sleep(0.1)
            return driver.find_element(By.ID, element_id).text

        def wait_text(element_id, expected):
            # Pages redraw as data arrives, replacing their elements: read
            # the element until it says `expected`, never a stale copy.
            try:
                wait.until(lambda d: text_now(element_id) == expected)
            except TimeoutException:
                raise Failure(f"#{element_id} says {text_now(element_id)!r}, not {expected!r}")

        def open_page(hash_):
            driver.get(base + hash_)
            wait.until(lambda d: d.find_element(By.ID, "main").get_attribute("data-ready") == "true")
            errors = driver.find_elements(By.ID, "error")
            check(not errors, f"{hash_}: {errors[0].text if errors else ''}")

        def shot(name):
            path = os.path.join(args.out, name)
            check(driver.save_screenshot(path), f"screenshot {path}")

        def texts(selector):
            for _ in range(50):
                try:
                    return [e.text for e in driver.find_elements(By.CSS_SELECTOR, selector)]
                except StaleElementReferenceException:
                    time.sleep(0.1)
            return [e.text for e in driver.find_elements(By.CSS_SELECTOR, selector)]

        # ---- a sweep, open while nothing has run: progress must come live.
        open_page(f"#/sweep/{sweep_a}")
        progress = driver.find_element(By.ID, "progress")
        check(progress.get_attribute("data-state") == "RUNNING",
              f"state {progress.get_attribute('data-state')}, want RUNNING")
        check(text_of("progress-text").startswith(f"0 / {CELLS_A} done"),
              text_of("progress-text"))
        worker = Proc([f"{bin_dir}/ranksweep-worker", f"--coordinator={addr}", "--device=cpu",
                       "--slots=1"], f"{work}/worker", env={"RANKSWEEP_TORCH_THREADS": "1"})
        procs.append(worker)
        WebDriverWait(driver, 240).until(
            lambda d: d.find_element(By.ID, "progress").get_attribute("data-state") == "DONE")
        # The stream's end is followed by a read of the sweep, which redraws.
        wait.until(lambda d: text_now("status") == "sweep DONE")
        progress_text = text_of("progress-text")
        check(progress_text.startswith(f"{CELLS_A} / {CELLS_A} done") and progress_text.endswith("DONE"),
              f"progress: {progress_text}")
        check(len(driver.find_elements(By.CSS_SELECTOR, "#events li")) > 0,
              "no live event message on the page")
        # The stream ends after the last event; the table, summary and plot
        # reload then.
        wait.until(lambda d: d.find_element(By.ID, "status").text == "sweep DONE")
        wait.until(lambda d: d.find_element(By.ID, "main").get_attribute("data-loading") == "false")
        check(len(driver.find_elements(By.CSS_SELECTOR, "#rows tbody tr")) == CELLS_A,
              f"{len(driver.find_elements(By.CSS_SELECTOR, '#rows tbody tr'))} rows, want {CELLS_A}")
        wait_text("row-count", f"{CELLS_A} of {CELLS_A} rows")
        # One line per head (train only: no test split), one point per seed.
        lines = driver.find_elements(By.CSS_SELECTOR, "#plot path.series-line")
        check(sorted(l.get_attribute("data-head") for l in lines) == HEADS_A,
              f"plot lines: {[l.get_attribute('data-head') for l in lines]}")
        check(all(l.get_attribute("data-split") == "train" for l in lines), "a test line without a test split")
        points = driver.find_elements(By.CSS_SELECTOR, "#plot .point")
        check(len(points) == CELLS_A, f"{len(points)} seed points, want {CELLS_A}")
        check(texts("#plot text.xtick") == ["1", "2", "4"], f"x ticks {texts('#plot text.xtick')}")
        # The summary: one row per head; the kernel head's transition is a
        # swept rank or undefined, the softmax head has none.
        summary_rows = driver.find_elements(By.CSS_SELECTOR, "#summary tbody tr")
        check([r.find_element(By.CSS_SELECTOR, "td").text for r in summary_rows] == HEADS_A,
              f"summary heads {[r.text for r in summary_rows]}")
        check(summary_rows[1].find_elements(By.CSS_SELECTOR, "td")[1].text == "no rank", summary_rows[1].text)
        check(summary_rows[0].find_elements(By.CSS_SELECTOR, "td")[1].text in ("1", "2", "4", "–"),
              summary_rows[0].text)
        wait_text("theory", "theory: no bound for this dataset")
        check(text_of("no-failures") == "none", "recent failures not empty")
        shot("sweep.png")

        # Sorting: the seed column ascending, then descending, on clicks.
        seed_col = [c.get_attribute("data-key") for c in
                    driver.find_elements(By.CSS_SELECTOR, "#rows thead th")].index("seed")

        def column(i):
            return [r.find_elements(By.CSS_SELECTOR, "td")[i].text
                    for r in driver.find_elements(By.CSS_SELECTOR, "#rows tbody tr")]

        before = column(seed_col)
        header = driver.find_element(By.CSS_SELECTOR, '#rows th[data-key="seed"]')
        header.click()
        ascending = column(seed_col)
        check(ascending == sorted(before, key=int), f"ascending seeds: {ascending}")
        check(header.get_attribute("aria-sort") == "ascending", header.get_attribute("aria-sort"))
        header.click()
        descending = column(seed_col)
        check(descending == sorted(before, key=int, reverse=True), f"descending seeds: {descending}")
        check(descending != ascending, "the order did not change")

        # Filtering: the softmax head has one row per seed.
        Select(driver.find_element(By.ID, "filter-head")).select_by_value("softmax")
        check(len(driver.find_elements(By.CSS_SELECTOR, "#rows tbody tr")) == 3, "softmax rows")
        # A done row, clicked, draws the learning curves of its head and
        # rank: a line per seed (this one highlighted) and their mean.
        driver.find_elements(By.CSS_SELECTOR, "#rows tbody tr")[0].click()
        wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#curves path.curve-line")) == 3)
        check(len(driver.find_elements(By.CSS_SELECTOR, "#curves path.curve-line.chosen")) == 1,
              "the clicked seed's curve is highlighted")
        check(len(driver.find_elements(By.CSS_SELECTOR, "#curves path.curve-mean")) == 1,
              "one mean curve")
        status, _, body = http_get(f"{base}api/sweeps/{sweep_a}/curves?head=softmax&rank=0")
        check(status == 200, f"curves: {status}")
        curves = json.loads(body)
        check(sorted(c["seed"] for c in curves) == [0, 1, 2], f"curves of seeds {curves}")
        for c in curves:
            check(c["step"] == sorted(c["step"]) and c["step"][0] == 50 and c["test_error"] is None,
                  f"curve {c}")
        status, _, _ = http_get(f"{base}api/sweeps/{sweep_a}/curves?head=softmax")
        check(status == 400, f"curves without a rank: {status}")
        wait_text("row-count", f"3 of {CELLS_A} rows")
        # The downloads carry the filter.
        status, headers, body = http_get(driver.find_element(By.ID, "download-csv").get_attribute("href"))
        check(status == 200, f"CSV download: {status}")
        check(headers.get("Content-Disposition") == f'attachment; filename="{sweep_a}-results.csv"',
              str(headers))
        csv_rows = list(csv.DictReader(io.StringIO(body)))
        check(len(csv_rows) == 3 and {r["head"] for r in csv_rows} == {"softmax"}, body)
        check(all(r["rank"] == "" for r in csv_rows), "softmax rank is not empty in the CSV")
        Select(driver.find_element(By.ID, "filter-head")).select_by_value("")
        status, _, body = http_get(driver.find_element(By.ID, "download-json").get_attribute("href"))
        check(status == 200 and len(json.loads(body)) == CELLS_A, f"JSON download: {status}")
        driver.find_element(By.ID, "filter-text").send_keys("kernel")
        check(len(driver.find_elements(By.CSS_SELECTOR, "#rows tbody tr")) == 9, "text filter")

        # ---- a sweep with a test split: a train and a test line for its
        # head, a seed point per split, a test error in every row.
        r = cli("watch", sweep_b)
        check(r.returncode == 0, f"watch {sweep_b}: {r.stderr}")
        open_page(f"#/sweep/{sweep_b}")
        lines = driver.find_elements(By.CSS_SELECTOR, "#plot path.series-line")
        check(sorted((l.get_attribute("data-head"), l.get_attribute("data-split")) for l in lines) ==
              [("kernel/relu_eps", "test"), ("kernel/relu_eps", "train")],
              f"plot lines: {[(l.get_attribute('data-head'), l.get_attribute('data-split')) for l in lines]}")
        check(len(driver.find_elements(By.CSS_SELECTOR, "#plot .point")) == 2 * CELLS_B, "test-split points")
        test_col = [c.get_attribute("data-key") for c in
                    driver.find_elements(By.CSS_SELECTOR, "#rows thead th")].index("test_error")
        test_errors = [r.find_elements(By.CSS_SELECTOR, "td")[test_col].text
                       for r in driver.find_elements(By.CSS_SELECTOR, "#rows tbody tr")]
        check(len(test_errors) == CELLS_B and all(re.fullmatch(r"[0-9.e-]+", t) for t in test_errors),
              f"test errors {test_errors}")
        check("Test transition" in text_of("summary"), "no test transition column")
        shot("sweep-test-split.png")

        # ---- sweeps: both sweeps, the first one done; tick both and compare.
        open_page("#/sweeps")
        wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#sweeps-table tbody tr")) == 2)
        rows = {r.find_element(By.CSS_SELECTOR, "a.sweep-link").text: r.text
                for r in driver.find_elements(By.CSS_SELECTOR, "#sweeps-table tbody tr")}
        check(set(rows) == {"ui-demo", "ui-compare"}, str(rows))
        check("DONE" in rows["ui-demo"] and f"{CELLS_A} / {CELLS_A}" in rows["ui-demo"], rows["ui-demo"])
        check(f"{CELLS_B} / {CELLS_B}" in rows["ui-compare"], rows["ui-compare"])
        shot("sweeps.png")
        # Found again for each click: the table redraws every 5 s.
        for sweep_id in (sweep_a, sweep_b):
            driver.find_element(By.CSS_SELECTOR, f'#sweeps-table input.pick[data-id="{sweep_id}"]').click()
        driver.find_element(By.ID, "compare-button").click()
        wait.until(lambda d: d.find_element(By.ID, "main").get_attribute("data-page") == "compare"
                   and d.find_element(By.ID, "main").get_attribute("data-ready") == "true")
        check(not driver.find_elements(By.ID, "error"), "compare page error")
        lines = driver.find_elements(By.CSS_SELECTOR, "#plot path.series-line")
        check(sorted(l.get_attribute("data-head") for l in lines) ==
              sorted(["ui-demo · kernel/elu1", "ui-demo · softmax", "ui-compare · kernel/relu_eps"]),
              f"compare lines: {[l.get_attribute('data-head') for l in lines]}")
        check(len(driver.find_elements(By.CSS_SELECTOR, "#plot .point")) == CELLS_A + CELLS_B,
              "compare points")
        shot("compare.png")
        # Test error: only the sweep with a test split has a line.
        Select(driver.find_element(By.ID, "compare-split")).select_by_value("test")
        lines = driver.find_elements(By.CSS_SELECTOR, "#plot path.series-line")
        check([l.get_attribute("data-head") for l in lines] == ["ui-compare · kernel/relu_eps"],
              f"compare test lines: {[l.get_attribute('data-head') for l in lines]}")

        # ---- a sweep with an lr axis: a column of the rows' lr, four rows
        # per lr, one plot line per (head, recipe) labelled with the recipe.
        r = cli("submit", "-f", "-", stdin=json.dumps(SWEEP_C))
        check(r.returncode == 0, f"submit: {r.stderr}")
        sweep_c = r.stdout.strip()
        r = cli("watch", sweep_c)
        check(r.returncode == 0, f"watch {sweep_c}: {r.stderr}")
        open_page(f"#/sweep/{sweep_c}")
        keys = [c.get_attribute("data-key") for c in driver.find_elements(By.CSS_SELECTOR, "#rows thead th")]
        check("axis_lr" in keys and keys.index("axis_lr") == keys.index("seed") + 1, f"columns {keys}")
        check("first_exact_step" in keys, f"no first_exact_step column: {keys}")
        check(driver.find_element(By.CSS_SELECTOR, '#rows th[data-key="axis_lr"]').text == "lr",
              driver.find_element(By.CSS_SELECTOR, '#rows th[data-key="axis_lr"]').text)
        lrs = [r.find_elements(By.CSS_SELECTOR, "td")[keys.index("axis_lr")].text
               for r in driver.find_elements(By.CSS_SELECTOR, "#rows tbody tr")]
        check(sorted(lrs) == ["0.005"] * 4 + ["0.02"] * 4, f"lr column {lrs}")
        wait_text("row-count", f"{CELLS_C} of {CELLS_C} rows")
        lines = driver.find_elements(By.CSS_SELECTOR, "#plot path.series-line")
        check(sorted(l.get_attribute("data-head") for l in lines) ==
              ["kernel/elu1 lr=0.005", "kernel/elu1 lr=0.02"],
              f"recipe lines: {[l.get_attribute('data-head') for l in lines]}")
        check(len(driver.find_elements(By.CSS_SELECTOR, "#plot .point")) == CELLS_C, "recipe points")
        # The groups: one per (rank, recipe), named by the recipe.
        recipes = [r.find_elements(By.CSS_SELECTOR, "td")[2].text
                   for r in driver.find_elements(By.CSS_SELECTOR, "#groups tbody tr")]
        check(sorted(recipes) == ["lr=0.005"] * 2 + ["lr=0.02"] * 2, f"group recipes {recipes}")
        shot("sweep-recipes.png")

        # ---- workers: the one worker, with the cells it trained.
        open_page("#/workers")
        rows = driver.find_elements(By.CSS_SELECTOR, "#workers-table tbody tr")
        check(len(rows) == 1, f"{len(rows)} workers, want 1")
        cells = {th.get_attribute("data-key"): td.text for th, td in
                 zip(driver.find_elements(By.CSS_SELECTOR, "#workers-table thead th"),
                     rows[0].find_elements(By.CSS_SELECTOR, "td"))}
        check(cells["device"].startswith("cpu"), str(cells))
        check(cells["slots"] == "1", str(cells))
        check(cells["completed_cells"] == str(CELLS_A + CELLS_B + CELLS_C), str(cells))
        check(cells["alive"] == "alive", str(cells))
        check(cells["standing"] == "good", str(cells))
        check(re.fullmatch(r"\d+ s ago", cells["last_seen"]) is not None, str(cells))
        shot("workers.png")

        # ---- a quarantine of that worker (stopped first, so its cells stay
        # pending): the second sweep's rows leave the plot and the summary;
        # the table lists them, marked INVALID, only when asked to.
        check(worker.stop() == 0, f"worker exited {worker.p.returncode} after SIGTERM")
        r = cli("workers", "quarantine", cells["id"])
        check(r.returncode == 0 and f": {CELLS_A + CELLS_B + CELLS_C} results" in r.stdout,
              f"quarantine: {r.stdout} {r.stderr}")
        # The workers page (still open; it refreshes every 5 s) marks it.
        def standing(d):
            head = d.find_elements(By.CSS_SELECTOR, "#workers-table thead th")
            row = d.find_elements(By.CSS_SELECTOR, "#workers-table tbody tr")[0]
            keys = [th.get_attribute("data-key") for th in head]
            return row.find_elements(By.CSS_SELECTOR, "td")[keys.index("standing")].text
        WebDriverWait(driver, 30, ignored_exceptions=(StaleElementReferenceException, IndexError)
                      ).until(lambda d: standing(d) == "quarantined")
        shot("workers-quarantined.png")
        open_page(f"#/sweep/{sweep_b}")
        check(driver.find_element(By.ID, "progress").get_attribute("data-state") == "RUNNING",
              "the sweep is not running again")
        check(not driver.find_elements(By.CSS_SELECTOR, "#rows tbody tr"), "invalid rows listed unasked")
        wait_text("row-count", f"0 of 0 rows ({CELLS_B} invalid not shown)")
        check(not driver.find_elements(By.CSS_SELECTOR, "#plot .point"), "an invalid result is plotted")
        wait_text("theory", "theory: no cell done yet")
        group_n = [r.find_elements(By.CSS_SELECTOR, "td")[2].text
                   for r in driver.find_elements(By.CSS_SELECTOR, "#groups tbody tr")]
        check(group_n == ["0/2", "0/2"], f"summary groups n: {group_n}")
        driver.find_element(By.ID, "filter-invalid").click()
        invalid_rows = driver.find_elements(By.CSS_SELECTOR, "#rows tbody tr")
        check(len(invalid_rows) == CELLS_B and all(r.get_attribute("class") == "invalid" for r in invalid_rows),
              f"{len(invalid_rows)} invalid rows, want {CELLS_B}")
        keys = [c.get_attribute("data-key") for c in driver.find_elements(By.CSS_SELECTOR, "#rows thead th")]
        for row in invalid_rows:
            tds = row.find_elements(By.CSS_SELECTOR, "td")
            check(tds[keys.index("state")].text == "INVALID", row.text)
            check(tds[keys.index("head")].text == "kernel/relu_eps", row.text)
            check(re.fullmatch(rf"invalidated \S+ by local: quarantine 1 of worker {re.escape(cells['id'])}",
                               tds[keys.index("failure")].text) is not None, row.text)
        wait_text("row-count", f"{CELLS_B} of {CELLS_B} rows ({CELLS_B} invalid)")
        check(not driver.find_elements(By.CSS_SELECTOR, "#plot .point"), "an invalid result is plotted")
        href = driver.find_element(By.ID, "download-csv").get_attribute("href")
        status, _, body = http_get(href)
        csv_rows = list(csv.DictReader(io.StringIO(body)))
        check(status == 200 and [(r["head"], r["state"]) for r in csv_rows] ==
              [("kernel/relu_eps", "INVALID")] * CELLS_B,
              f"CSV download with invalid rows: {status} {body}")
        shot("sweep-invalid.png")
        driver.find_element(By.ID, "filter-invalid").click()
        status, _, body = http_get(driver.find_element(By.ID, "download-csv").get_attribute("href"))
        check(status == 200 and not list(csv.DictReader(io.StringIO(body))),
              f"CSV download without invalid rows: {body}")
        open_page("#/workers")  # leave the live page

        # The pages ran without a script error or a blocked resource.
        severe = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
        check(not severe, f"browser console errors: {severe}")

        def post(path, body, headers):
            return http_get(base + path, dict({"Content-Type": "application/json"}, **headers),
                            data=body.encode())

        def error_of(body):
            return json.loads(body)["error"]

        def state_of(sweep_id):
            r = cli("status", sweep_id)
            check(r.returncode == 0, f"status {sweep_id}: {r.stderr}")
            return re.search(r"^state: +(\S+)$", r.stdout, re.M).group(1)

        def stale_banner(d):
            banner = d.find_element(By.ID, "stale")
            return banner.text if banner.is_displayed() else ""

        # ---- a sweep page open across a coordinator restart: stale while it
        # is down (never a state it did not say), then the state `ranksweep
        # status` says once it is back and the sweep has run.
        r = cli("submit", "-f", "-", stdin=json.dumps(SWEEP_D))
        check(r.returncode == 0, f"submit: {r.stderr}")
        sweep_d = r.stdout.strip()
        open_page(f"#/sweep/{sweep_d}")
        wait.until(lambda d: d.find_element(By.ID, "status").text == "live")
        stop_server()
        wait.until(lambda d: stale_banner(d).startswith("Not current: "))
        check(driver.find_element(By.TAG_NAME, "body").get_attribute("data-stale") == "true",
              "the page is not marked stale")
        check(text_of("sweep-state") == "RUNNING",
              f"header during the outage: {text_of('sweep-state')}")
        shot("sweep-stale.png")
        start_server()
        worker2 = Proc([f"{bin_dir}/ranksweep-worker", f"--coordinator={addr}", "--device=cpu",
                        "--slots=1"], f"{work}/worker2", env={"RANKSWEEP_TORCH_THREADS": "1"})
        procs.append(worker2)
        WebDriverWait(driver, 120).until(
            lambda d: d.find_element(By.ID, "progress").get_attribute("data-state") == "DONE")
        check(state_of(sweep_d) == "DONE", f"ranksweep status says {state_of(sweep_d)}")
        wait.until(lambda d: stale_banner(d) == "")
        check(text_of("progress-text").startswith(f"{CELLS_D} / {CELLS_D} done"),
              text_of("progress-text"))
        wait_text("sweep-state", "DONE")
        check(driver.find_element(By.TAG_NAME, "body").get_attribute("data-stale") == "false",
              "still marked stale")
        wait.until(lambda d: d.find_element(By.ID, "status").text == "sweep DONE")
        # The cells the quarantine gave back ran again too.
        for sweep_id in (sweep_a, sweep_b, sweep_c):
            check(cli("watch", sweep_id).returncode == 0, f"{sweep_id} did not finish")
        check(worker2.stop() == 0, f"worker exited {worker2.p.returncode} after SIGTERM")
        procs.remove(worker2)

        # ---- pages loaded while the coordinator is down: they say so, with
        # no error card, and show the data once it is back.
        stop_server()
        driver.get(base + "#/sweeps")
        wait.until(lambda d: stale_banner(d).startswith("Not current: coordinator at "))
        check("Nothing read yet" in stale_banner(driver), stale_banner(driver))
        check(not driver.find_elements(By.ID, "error"), "an error card during the outage")
        shot("sweeps-outage.png")
        start_server()
        wait.until(lambda d: stale_banner(d) == "" and
                   len(d.find_elements(By.CSS_SELECTOR, "#sweeps-table tbody tr")) == 4)
        check(not driver.find_elements(By.ID, "error"), "an error card after the outage")
        wait_text("sweep-count", "4 sweeps")
        stop_server()
        driver.get(base + f"#/sweep/{sweep_d}")
        wait.until(lambda d: d.find_elements(By.ID, "waiting") and stale_banner(d).startswith("Not current: "))
        start_server()
        wait.until(lambda d: d.find_elements(By.ID, "progress-text") and
                   d.find_element(By.ID, "main").get_attribute("data-ready") == "true")
        check(text_of("progress-text").startswith(f"{CELLS_D} / {CELLS_D} done"),
              text_of("progress-text"))
        check(stale_banner(driver) == "" and not driver.find_elements(By.ID, "error"),
              f"after the outage: {stale_banner(driver)}")

        # ---- compare: the settings that differ between two sweeps.
        open_page(f"#/compare/{sweep_a},{sweep_c}")
        diff_rows = {r.get_attribute("data-key"): [td.text for td in r.find_elements(By.CSS_SELECTOR, "td")[1:]]
                     for r in driver.find_elements(By.CSS_SELECTOR, "#config-diff tbody tr")}
        check(diff_rows.get("name") == ["ui-demo", "ui-recipes"], f"name row: {diff_rows}")
        check(diff_rows.get("train.max_steps") == ["300", "200"], f"max_steps row: {diff_rows}")
        check("dataset.kind" not in diff_rows and "train.eval_every" not in diff_rows,
              f"a setting they share is listed: {sorted(diff_rows)}")
        m = re.fullmatch(r"(\d+) settings differ; (\d+) are the same\.",
                         text_of("config-same"))
        check(m is not None and int(m.group(1)) == len(diff_rows) and int(m.group(2)) > 0,
              text_of("config-same"))
        shot("compare-config.png")

        # ---- the plot: a legend entry hides and shows its line; the metric
        # and the log scale are choices.
        open_page(f"#/sweep/{sweep_a}")

        def line_heads():
            return sorted(l.get_attribute("data-head")
                          for l in driver.find_elements(By.CSS_SELECTOR, "#plot path.series-line"))

        driver.find_element(By.CSS_SELECTOR, '#plot .legend-entry[data-key="softmax|train"] text').click()
        check(line_heads() == ["kernel/elu1"], f"lines after hiding softmax: {line_heads()}")
        check(driver.find_element(By.CSS_SELECTOR, '#plot .legend-entry[data-key="softmax|train"]')
              .get_attribute("data-hidden") == "true", "the legend entry is not marked hidden")
        check(len(driver.find_elements(By.CSS_SELECTOR, "#plot .point")) == 9, "points of the shown head")
        driver.find_element(By.CSS_SELECTOR, '#plot .legend-entry[data-key="softmax|train"] text').click()
        check(line_heads() == HEADS_A, f"lines after showing softmax: {line_heads()}")
        Select(driver.find_element(By.ID, "plot-metric")).select_by_value("final_loss")
        check(driver.find_element(By.CSS_SELECTOR, "#plot").get_attribute("aria-label") == "ui-demo",
              "plot title")
        check(line_heads() == HEADS_A, f"final loss lines: {line_heads()}")
        linear = texts("#plot text.ytick")
        check(linear[0] == "0" and float(linear[-1]) > 0, f"linear ticks {linear}")
        driver.find_element(By.ID, "plot-logy").click()
        check(driver.find_element(By.CSS_SELECTOR, "#plot").get_attribute("data-scale") == "log", "log scale")
        ticks = [float(t) for t in texts("#plot text.ytick")]
        check(len(ticks) >= 2 and all(abs(math.log10(t) - round(math.log10(t))) < 1e-9 for t in ticks),
              f"log ticks {ticks}")
        check(len(driver.find_elements(By.CSS_SELECTOR, "#plot .point")) == CELLS_A, "log-scale points")
        shot("sweep-loss-log.png")

        # ---- managing sweeps. This browser has not opened the manage link: a
        # viewer, told so, and refused.
        check(text_of("manage-readonly") ==
              "You are a viewer: open the manage link `ranksweep ui` printed to change this sweep.",
              text_of("manage-readonly"))
        origin = base.rstrip("/")
        status, _, body = post(f"api/sweeps/{sweep_a}/update", '{"note": "x"}', {"Origin": origin})
        check(status == 403 and error_of(body) == "viewers may not change sweeps: open the manage link "
              "that `ranksweep ui` printed to act with its token", f"viewer: {status} {body}")
        # Another site's page, or a form, is refused even with the key.
        status, _, body = post(f"api/sweeps/{sweep_a}/update", '{"note": "x"}',
                               {"Origin": "http://evil.example", "X-Ranksweep-Key": key})
        check(status == 403 and error_of(body) == f'Origin "http://evil.example" is not this dashboard '
              f'({origin}): only its own pages may change sweeps', f"cross-site: {status} {body}")
        status, _, body = post(f"api/sweeps/{sweep_a}/update", "note=x",
                               {"Content-Type": "application/x-www-form-urlencoded", "X-Ranksweep-Key": key})
        check(status == 415, f"form: {status} {body}")
        status, _, body = http_get(f"{base}api/sweeps/{sweep_a}/cancel")
        check(status == 405, f"GET of an action: {status}")
        status, _, body = post(f"api/sweeps/{sweep_a}/update", '{"note": 5}', {"X-Ranksweep-Key": key})
        check(status == 400 and error_of(body) == "note: must be a string of 0..4096 bytes", f"{status} {body}")

        # The manage link: this browser may act from now on.
        driver.get(manage_link)
        wait.until(lambda d: d.current_url.endswith("#/sweeps") and
                   d.find_element(By.ID, "main").get_attribute("data-ready") == "true")
        open_page(f"#/sweep/{sweep_a}")
        note = driver.find_element(By.ID, "note-input")
        note.clear()
        note.send_keys("lr too high; rerun at 0.003")
        driver.find_element(By.ID, "note-save").click()
        wait.until(lambda d: d.find_elements(By.ID, "sweep-note") and
                   d.find_element(By.ID, "sweep-note").text == "lr too high; rerun at 0.003")
        driver.find_element(By.ID, "tag-input").send_keys("paper ood")
        driver.find_element(By.ID, "tag-add").click()
        wait.until(lambda d: texts("#sweep-tags .tag") == ["ood", "paper"])
        driver.find_element(By.CSS_SELECTOR, '#manage .tag-remove[data-tag="ood"]').click()
        wait.until(lambda d: texts("#sweep-tags .tag") == ["paper"])
        driver.find_element(By.ID, "tag-input").send_keys("bad tag!")
        driver.find_element(By.ID, "tag-add").click()
        wait.until(lambda d: d.find_element(By.ID, "manage-message").text ==
                   'tags[1] must use only the characters A-Z a-z 0-9 . _ : -, got "tag!"')
        rename = driver.find_element(By.ID, "rename-input")
        rename.clear()
        rename.send_keys("ui-demo-v2")
        driver.find_element(By.ID, "rename-save").click()
        wait.until(lambda d: d.find_element(By.ID, "sweep-name").text == "ui-demo-v2")
        shot("sweep-managed.png")

        # The list: search (the note, any case), state, tag and owner.
        open_page("#/sweeps")

        def listed():
            return sorted(a.text for a in driver.find_elements(By.CSS_SELECTOR, "#sweeps-table a.sweep-link"))

        def count_is(n):
            wait.until(lambda d: d.find_element(By.ID, "sweep-count").text.startswith(f"{n} sweep"))

        count_is(4)
        driver.find_element(By.ID, "list-search").send_keys("RERUN")
        count_is(1)
        check(listed() == ["ui-demo-v2"], f"search: {listed()}")
        driver.find_element(By.ID, "list-search").clear()
        driver.find_element(By.ID, "list-search").send_keys(" ")
        count_is(4)
        Select(driver.find_element(By.ID, "list-tag")).select_by_value("paper")
        count_is(1)
        check(listed() == ["ui-demo-v2"], f"tag: {listed()}")
        Select(driver.find_element(By.ID, "list-tag")).select_by_value("")
        Select(driver.find_element(By.ID, "list-state")).select_by_value("CANCELLED")
        count_is(0)
        Select(driver.find_element(By.ID, "list-state")).select_by_value("DONE")
        count_is(4)
        check(listed() == ["ui-compare", "ui-demo-v2", "ui-recipes", "ui-restart"], f"done: {listed()}")
        Select(driver.find_element(By.ID, "list-state")).select_by_value("")
        Select(driver.find_element(By.ID, "list-owner")).select_by_value("local")
        count_is(4)
        wait_text("sweep-count", "4 sweeps match")
        status, _, body = http_get(f"{base}api/sweeps?owner=nobody")
        check(status == 200 and json.loads(body) == [], f"owner nobody: {body}")
        status, _, body = http_get(f"{base}api/sweeps?state=paused")
        check(status == 400 and error_of(body) ==
              'state: "paused" is not one of running, done, failed, cancelled', body)
        shot("sweeps-filtered.png")

        # Archive: out of the list, back with "archived too".
        open_page(f"#/sweep/{sweep_a}")
        driver.find_element(By.ID, "archive-button").click()
        wait.until(lambda d: d.find_element(By.ID, "archive-button").text == "Unarchive")
        open_page("#/sweeps")
        count_is(3)
        check("ui-demo-v2" not in listed(), f"archived listed: {listed()}")
        driver.find_element(By.ID, "list-archived").click()
        count_is(4)
        check("ui-demo-v2" in listed(), f"archived not listed: {listed()}")

        # Cancel, retry the cancelled cells, cancel again, then delete: only
        # once the id is typed.
        r = cli("submit", "-f", "-", stdin=json.dumps(SWEEP_E))
        check(r.returncode == 0, f"submit: {r.stderr}")
        sweep_e = r.stdout.strip()
        open_page(f"#/sweep/{sweep_e}")
        check(driver.find_element(By.ID, "delete-button").get_attribute("disabled") is not None,
              "delete is offered for a running sweep")
        driver.find_element(By.ID, "cancel-button").click()
        wait.until(lambda d: d.find_element(By.ID, "sweep-state").text == "CANCELLED")
        wait_text("manage-message", f"cancelled {CELLS_E} cells")
        check(state_of(sweep_e) == "CANCELLED", "not cancelled")
        wait_text("retry-cancelled", f"Retry {CELLS_E} cancelled")
        click("retry-cancelled")
        wait.until(lambda d: d.find_element(By.ID, "sweep-state").text == "RUNNING")
        wait_text("manage-message", f"retrying {CELLS_E} cells")
        check(state_of(sweep_e) == "RUNNING", "not running again")
        click("cancel-button")
        wait.until(lambda d: d.find_element(By.ID, "sweep-state").text == "CANCELLED")
        click("delete-button")
        driver.find_element(By.ID, "delete-confirm").send_keys(sweep_e[:-1])
        driver.find_element(By.ID, "delete-go").click()
        wait.until(lambda d: d.find_element(By.ID, "manage-message").text ==
                   f"delete of sweep {sweep_e} not confirmed: confirm must repeat the sweep id")
        check(state_of(sweep_e) == "CANCELLED", "deleted without confirmation")
        driver.find_element(By.ID, "delete-confirm").send_keys(sweep_e[-1])
        driver.find_element(By.ID, "delete-go").click()
        wait.until(lambda d: d.find_element(By.ID, "main").get_attribute("data-page") == "sweeps")
        r = cli("status", sweep_e)
        check(r.returncode == 3, f"status of a deleted sweep exited {r.returncode}: {r.stdout}")

        # A cell that failed for good: listed with its reason, and retried
        # from the page.
        r = cli("submit", "-f", "-", stdin=json.dumps(SWEEP_F))
        check(r.returncode == 0, f"submit: {r.stderr}")
        sweep_f = r.stdout.strip()
        failer = Proc([f"{bin_dir}/ranksweep-fake-worker", f"--coordinator={addr}",
                       "--fail_tasks", "--once", "--idle_exit_seconds=2", "--poll_ms=200"],
                      f"{work}/failer.log")
        procs.append(failer)
        check(failer.p.wait(60) == 0, f"the failing worker exited {failer.p.returncode}")
        check(state_of(sweep_f) == "FAILED", f"not failed: {state_of(sweep_f)}")
        open_page(f"#/sweep/{sweep_f}")
        wait.until(lambda d: d.find_element(By.ID, "failure-count").text == "1 failed cell")
        def failed_row():
            try:
                return [c.text for c in
                        driver.find_elements(By.CSS_SELECTOR, "#failed-cells tbody tr td")]
            except StaleElementReferenceException:
                return []

        def failed_row_is_right(texts):
            return (len(texts) == 6 and texts[0] == "kernel/elu1" and texts[1] == "1" and
                    texts[3] == "3" and
                    texts[5].endswith(": INTERNAL: injected failure (--fail-tasks) "
                                      "(attempt 3 of 3)"))
        try:
            wait.until(lambda d: failed_row_is_right(failed_row()))
        except TimeoutException:
            raise Failure(f"failed cell row: {failed_row()}")
        shot("sweep-failures.png")
        wait_text("retry-failed", "Retry 1 failed")
        driver.find_element(By.ID, "retry-failed").click()
        wait.until(lambda d: d.find_element(By.ID, "sweep-state").text == "RUNNING")
        wait_text("manage-message", "retrying 1 cell")
        check(state_of(sweep_f) == "RUNNING", "not running again")

        # Ctrl-C (SIGINT) stops the dashboard cleanly.
        ui.p.send_signal(signal.SIGINT)
        check(ui.p.wait(20) == 0, f"ui exited {ui.p.returncode} after SIGINT")
        print(f"PASS; screenshots in {args.out}")
        return 0
    except Failure as e:
        print(f"FAIL: {e}", file=sys.stderr)
        for name in ("server", "worker", "ui"):
            path = f"{work}/{name}.stderr"
            if os.path.exists(path):
                with open(path) as f:
                    print(f"--- {name} stderr (last 2000 chars)\n{f.read()[-2000:]}", file=sys.stderr)
        if driver is not None:
            try:
                driver.save_screenshot(os.path.join(args.out, "failure.png"))
            except Exception:  # the failure above matters more
                pass
        return 1
    finally:
        if driver is not None:
            driver.quit()
        for p in reversed(procs):
            p.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
