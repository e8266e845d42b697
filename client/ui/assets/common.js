// The dashboard's shared parts: building DOM and SVG, calling /api/,
// acting with the action key, the freshness banner, formatting, and the
// sortable table. Loaded first; the other scripts of index.html use these
// (plain scripts sharing one global scope, no framework, no modules).
'use strict';

// "1 cell", "2 cells": a count and its noun, singular for one.
const counted = (n, noun) => `${n} ${noun}${n === 1 ? '' : 's'}`;

// Rows a table shows, and per-seed points a plot draws, at most.
const MAX_TABLE_ROWS = 2000;
const MAX_PLOT_POINTS = 5000;

const COLORS = ['#2f5fd0', '#d0612f', '#1f8a4c', '#8e44ad', '#c23b30', '#16808c', '#b7791f', '#5d6778'];

// ------------------------------------------------------------------ helpers

// el('td', {class: 'num'}, 'text', child...): an element with attributes and
// children (strings become text nodes, null is skipped).
function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith('on')) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v === true ? '' : v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

function svg(tag, attrs, ...children) {
  const node = document.createElementNS('http://www.w3.org/2000/svg', tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v !== null && v !== undefined) node.setAttribute(k, v);
  }
  for (const c of children) {
    if (c !== null && c !== undefined) node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

// An error of a call to this dashboard: status is the HTTP status, 0 when
// the dashboard itself did not answer.
class ApiError extends Error {
  constructor(message, status) { super(message); this.status = status; }
}
// Whether a failure is an outage (the dashboard or the coordinator cannot be
// reached, or timed out) that retrying may cure, not an answer.
function isOutage(err) { return [0, 502, 503, 504].includes(err.status); }

async function call(path, init) {
  let response;
  try {
    response = await fetch(path, Object.assign({cache: 'no-store'}, init || {}));
  } catch (e) {
    throw new ApiError('the dashboard does not answer (is `ranksweep ui` still running?)', 0);
  }
  let body = null;
  try { body = await response.json(); } catch (e) { /* not JSON */ }
  if (!response.ok) throw new ApiError((body && body.error) || `${response.status} ${response.statusText}`, response.status);
  return body;
}
function api(path) { return call(path); }

// ------------------------------------------------------------------ actions

// The action key comes from the manage link `ranksweep ui` prints
// (#key=...); the page keeps it in this origin's storage and sends it with
// every action, in a header no other site's page can set.
const KEY_STORE = 'ranksweep-action-key';
const session = {canAct: false, readOnly: false};
function actionKey() { return localStorage.getItem(KEY_STORE) || ''; }
function takeKeyFromLink() {
  const m = location.hash.match(/^#key=([0-9a-f]+)$/);
  if (!m) return;
  localStorage.setItem(KEY_STORE, m[1]);
  history.replaceState(null, '', '#/sweeps');  // the key leaves the address bar
}
async function loadSession() {
  const s = await call('/api/session', {headers: {'X-Ranksweep-Key': actionKey()}});
  session.canAct = s.can_act;
  session.readOnly = s.read_only;
  // A key from an earlier run: it will never act again.
  if (!s.can_act && actionKey()) localStorage.removeItem(KEY_STORE);
}
function act(path, body) {
  return call(path, {method: 'POST', headers: {'Content-Type': 'application/json', 'X-Ranksweep-Key': actionKey()},
                     body: JSON.stringify(body || {})});
}

// ------------------------------------------------------------------ freshness

// Nothing on a page is shown as current when it is not: while the
// coordinator (or this dashboard) cannot be reached, the banner says since
// when the page's data dates and the page is greyed; loads retry with
// backoff and the banner goes once one succeeds.
const BACKOFF_MS = [1000, 2000, 4000, 8000, 15000];
function backoff(attempt) { return BACKOFF_MS[Math.min(attempt, BACKOFF_MS.length) - 1] || BACKOFF_MS[0]; }
let freshAt = null;  // when the page's data was last read whole
function markFresh() {
  freshAt = Date.now();
  document.body.dataset.stale = 'false';
  document.getElementById('stale').hidden = true;
}
function markStale(err, retryMs) {
  document.body.dataset.stale = 'true';
  const banner = document.getElementById('stale');
  banner.hidden = false;
  banner.textContent = `Not current: ${err.message || err}. ` +
      (freshAt ? `Showing what was read at ${fmtTime(freshAt)}` : 'Nothing read yet') +
      `; retrying in ${Math.round(retryMs / 1000)} s.`;
}

// Runs load() now and then every periodMs while the page is open; a failed
// load marks the page stale and is retried with backoff, a good one marks
// it fresh. Returns a function that loads at once (after a filter
// changed), whose `first` is the first load (it never rejects).
function keepLoading(load, periodMs) {
  let attempt = 0, timer = null, left = false;
  const run = async () => {
    timer = null;
    try {
      await load();
      if (left) return;
      attempt = 0;
      markFresh();
    } catch (e) {
      if (left) return;
      attempt++;
      markStale(e, backoff(attempt));
    }
    timer = setTimeout(run, attempt ? backoff(attempt) : periodMs);
  };
  onLeave(() => { left = true; clearTimeout(timer); });
  const now = () => { clearTimeout(timer); return run(); };
  now.first = run();
  return now;
}

function pad2(n) { return String(n).padStart(2, '0'); }
function fmtTime(ms) {
  if (ms === null || ms === undefined) return '–';
  const d = new Date(ms);
  return `${d.getFullYear()}-${pad2(d.getMonth() + 1)}-${pad2(d.getDate())} ` +
         `${pad2(d.getHours())}:${pad2(d.getMinutes())}:${pad2(d.getSeconds())}`;
}
function fmtAgo(seconds) {
  if (seconds === null || seconds === undefined) return '–';
  if (seconds < 60) return `${Math.max(0, Math.round(seconds))} s ago`;
  if (seconds < 3600) return `${Math.round(seconds / 60)} min ago`;
  return `${(seconds / 3600).toFixed(1)} h ago`;
}
// Numbers as a reader wants them: 4 significant digits, '–' for missing.
function fmtNum(x) {
  if (x === null || x === undefined) return '–';
  if (typeof x !== 'number') return String(x);
  if (Number.isInteger(x)) return String(x);
  return String(Number(x.toPrecision(4)));
}
function fmtBytes(b) {
  if (!b) return '–';
  const gib = b / (1 << 30);
  return gib >= 1 ? `${gib.toFixed(1)} GiB` : `${(b / (1 << 20)).toFixed(0)} MiB`;
}

function badge(text, cls) { return el('span', {class: `badge ${cls || text}`}, text); }

function progressBar(sweep, wide) {
  const c = sweep.counts;
  const finished = c.done + c.failed + c.cancelled;
  const bar = el('div', {class: wide ? 'bar wide' : 'bar'});
  const fill = el('div', {class: sweep.state});
  fill.style.width = c.total > 0 ? `${(100 * finished / c.total).toFixed(1)}%` : '0%';
  bar.append(fill);
  return bar;
}

function setStatus(text, isError) {
  const s = document.getElementById('status');
  s.textContent = text;
  s.className = isError ? 'status error' : 'status';
}

function errorCard(err) {
  return el('div', {class: 'card error', id: 'error'}, String(err.message || err));
}

// A table whose columns sort on a click of their header. columns:
// [{key, label, num, wrap, value(row) -> sort key, cell(row) -> node or text}];
// rowClass(row) -> a class for the row's <tr>, or null.
class SortableTable {
  constructor(id, columns, rowClass, onRowClick) {
    this.columns = columns;
    this.rowClass = rowClass || (() => null);
    this.onRowClick = onRowClick || null;
    this.rows = [];
    this.sortKey = null;
    this.sortDir = 1;
    this.table = el('table', {id});
    this.thead = el('thead');
    this.tbody = el('tbody');
    const tr = el('tr');
    for (const col of columns) {
      const th = el('th', {class: `sortable${col.num ? ' num' : ''}`, 'data-key': col.key,
                           'aria-sort': 'none', title: 'Sort'}, col.label);
      th.addEventListener('click', () => this.sortBy(col.key));
      tr.append(th);
    }
    this.thead.append(tr);
    this.table.append(this.thead, this.tbody);
  }
  sortBy(key) {
    if (this.sortKey === key) this.sortDir = -this.sortDir;
    else { this.sortKey = key; this.sortDir = 1; }
    for (const th of this.thead.querySelectorAll('th')) {
      th.setAttribute('aria-sort', th.dataset.key !== this.sortKey ? 'none'
                      : (this.sortDir > 0 ? 'ascending' : 'descending'));
    }
    this.render();
  }
  setRows(rows) { this.rows = rows; this.render(); }
  sorted() {
    if (this.sortKey === null) return this.rows;
    const col = this.columns.find(c => c.key === this.sortKey);
    const value = col.value || (r => r[col.key]);
    // Missing values sort last whichever the direction.
    return [...this.rows].sort((a, b) => {
      const x = value(a), y = value(b);
      const xm = x === null || x === undefined, ym = y === null || y === undefined;
      if (xm || ym) return xm === ym ? 0 : (xm ? 1 : -1);
      return (x < y ? -1 : x > y ? 1 : 0) * this.sortDir;
    });
  }
  // At most MAX_TABLE_ROWS rows go into the page (a browser slows to a crawl
  // on 100,000); sorting and filtering still see every row, and the
  // downloads carry them all.
  render() {
    const body = el('tbody');
    const rows = this.sorted();
    this.table.dataset.hidden = Math.max(0, rows.length - MAX_TABLE_ROWS);
    for (const row of rows.slice(0, MAX_TABLE_ROWS)) {
      const tr = el('tr', {class: this.rowClass(row)});
      // Only done rows have learning curves to show.
      if (this.onRowClick && row.state === 'DONE') {
        tr.classList.add('clickable');
        tr.addEventListener('click', () => this.onRowClick(row));
      }
      for (const col of this.columns) {
        const content = col.cell ? col.cell(row) : fmtNum(row[col.key]);
        tr.append(el('td', {class: col.num ? 'num' : (col.wrap ? 'wrap' : null)}, content));
      }
      body.append(tr);
    }
    this.tbody.replaceWith(body);
    this.tbody = body;
  }
}
