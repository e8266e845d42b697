// The dashboard's pages, drawn in the browser from the JSON of /api/ (see
// client/ui/dashboard.h). No framework and nothing from a network: plain DOM
// and SVG. Pages live behind the hash: #/sweeps, #/sweep/ID,
// #/compare/ID,ID..., #/workers.
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

// ------------------------------------------------------------------ the plot

// A metric against rank. series: [{label, color, split: 'train'|'test',
// hasRank, means: [{rank, mean, ci95 (null: no band)}], points: [{rank,
// seed, value}]}]. Ranks sit on a log2 axis with a tick at every swept rank;
// the line joins adjacent swept ranks only (a rank not swept has no marker,
// so a straight segment over it claims nothing at it) and the band is the
// 95% interval of the mean. A rank-less head (softmax) is a dotted level
// across the plot, its seeds in a "no rank" column at the right. bounds:
// {lower, upper} or null draw the theory's rank bounds as vertical lines.
// opts: id, title, yLabel; unitRange (the y axis is 0..1, else 0..the
// largest value); logY (a log10 axis over the positive values; values at or
// below its bottom sit on it); hidden (a Set of series keys "label|split"
// not drawn) and onToggle (called after a legend entry, clicked, changed
// it).
function renderPlot(series, bounds, opts) {
  const W = 760, H = 340, left = 52, top = 14, bottom = 44, legendW = 230;
  const right = W - legendW;
  const hidden = opts.hidden || new Set();
  const keyOf = s => `${s.label}|${s.split}`;
  const shown = series.filter(s => !hidden.has(keyOf(s)));
  const ranks = [...new Set(series.filter(s => s.hasRank).flatMap(s => s.means.map(m => m.rank)
      .concat(s.points.map(p => p.rank))))].sort((a, b) => a - b);
  const anyRankless = series.some(s => !s.hasRank);
  const root = svg('svg', {class: 'plot', id: opts.id, viewBox: `0 0 ${W} ${H}`, role: 'img',
                           'aria-label': opts.title || 'metric against rank',
                           'data-scale': opts.logY ? 'log' : 'linear'});
  const plotRight = anyRankless ? right - 60 : right - 10;
  const lo = ranks.length ? Math.log2(ranks[0]) : 0;
  const hi = ranks.length ? Math.log2(ranks[ranks.length - 1]) : 1;
  const x = r => ranks.length <= 1 ? (left + plotRight) / 2
      : left + 16 + (Math.log2(r) - lo) / (hi - lo) * (plotRight - left - 32);
  const xNoRank = right - 30;
  // The y range: from the values shown.
  const values = shown.flatMap(s => s.means.map(m => m.mean).concat(s.points.map(p => p.value)))
      .filter(v => v !== null && Number.isFinite(v));
  let yLo = 0, yHi = 1, ticks;
  if (opts.logY) {
    const pos = values.filter(v => v > 0);
    yLo = 10 ** Math.floor(Math.log10(pos.length ? Math.min(...pos) : 1e-3));
    yHi = 10 ** Math.ceil(Math.log10(pos.length ? Math.max(...pos) : 1));
    if (yHi <= yLo) yHi = yLo * 10;
    ticks = [];
    for (let t = yLo; t <= yHi * 1.0001; t *= 10) ticks.push(t);
  } else {
    if (!opts.unitRange) yHi = values.length ? Math.max(1e-9, ...values) * 1.05 : 1;
    ticks = [0, 0.25, 0.5, 0.75, 1].map(f => yLo + f * (yHi - yLo));
  }
  const frac = v => opts.logY ? (Math.log10(Math.max(v, yLo)) - Math.log10(yLo)) / (Math.log10(yHi) - Math.log10(yLo))
                              : (v - yLo) / (yHi - yLo);
  const y = v => top + (1 - Math.min(1, Math.max(0, frac(v)))) * (H - top - bottom);
  const yBase = y(yLo);
  // Grid and axes.
  for (const v of ticks) {
    root.append(svg('line', {class: 'gridline', x1: left, x2: right, y1: y(v), y2: y(v)}));
    root.append(svg('text', {class: 'ytick', x: left - 6, y: y(v) + 4, 'text-anchor': 'end'}, fmtNum(v)));
  }
  root.append(svg('line', {class: 'axis', x1: left, x2: right, y1: yBase, y2: yBase}));
  root.append(svg('line', {class: 'axis', x1: left, x2: left, y1: top, y2: yBase}));
  for (const r of ranks) {
    root.append(svg('line', {class: 'axis', x1: x(r), x2: x(r), y1: yBase, y2: yBase + 4}));
    root.append(svg('text', {class: 'xtick', x: x(r), y: yBase + 16, 'text-anchor': 'middle'}, String(r)));
  }
  if (anyRankless) {
    root.append(svg('text', {x: xNoRank, y: yBase + 16, 'text-anchor': 'middle'}, 'no rank'));
  }
  root.append(svg('text', {x: (left + plotRight) / 2, y: H - 8, 'text-anchor': 'middle'},
                  'rank (log scale; ticks at the swept ranks)'));
  const yLabel = (opts.yLabel || 'error (1 − exact-sequence accuracy)') + (opts.logY ? ', log scale' : '');
  root.append(svg('text', {x: 14, y: (top + yBase) / 2, 'text-anchor': 'middle',
                           transform: `rotate(-90 14 ${(top + yBase) / 2})`}, yLabel));
  // Theory bounds, where they fall inside the swept range.
  if (bounds && ranks.length > 1) {
    for (const [name, b] of [['lower bound', bounds.lower], ['upper bound', bounds.upper]]) {
      if (b === null || b === undefined || b < ranks[0] || b > ranks[ranks.length - 1]) continue;
      root.append(svg('line', {class: 'bound', x1: x(b), x2: x(b), y1: top, y2: yBase}));
      root.append(svg('text', {x: x(b) + 3, y: top + 10}, `${name} ${b}`));
    }
  }
  // Series: band, line, points.
  const tooMany = shown.reduce((n, t) => n + t.points.length, 0) > MAX_PLOT_POINTS;
  for (const s of shown) {
    const g = svg('g', {class: 'series', 'data-head': s.label, 'data-split': s.split});
    const means = [...s.means].sort((a, b) => a.rank - b.rank);
    const band = means.length > 1 && means.every(m => m.ci95 !== null && m.ci95 !== undefined);
    if (s.hasRank && means.length) {
      if (band) {
        const upper = means.map(m => `${x(m.rank)},${y(m.mean + m.ci95)}`);
        const lower = means.map(m => `${x(m.rank)},${y(m.mean - m.ci95)}`).reverse();
        g.append(svg('polygon', {class: `band ${s.split}`, fill: s.color, points: upper.concat(lower).join(' ')}));
      }
      const d = means.map((m, j) => `${j ? 'L' : 'M'}${x(m.rank)},${y(m.mean)}`).join(' ');
      g.append(svg('path', {class: `series-line ${s.split}`, stroke: s.color, d,
                            'data-head': s.label, 'data-split': s.split}));
      for (const m of means) {
        const ci = m.ci95 === null || m.ci95 === undefined ? '' : ` ± ${fmtNum(m.ci95)}`;
        g.append(svg('circle', {cx: x(m.rank), cy: y(m.mean), r: 3.5, fill: s.color},
                     svg('title', {}, `${s.label} rank ${m.rank}: mean ${fmtNum(m.mean)}${ci}`)));
      }
    } else if (!s.hasRank && means.length) {
      const m = means[0];
      g.append(svg('path', {class: `series-line norank ${s.split}`, stroke: s.color,
                            'data-head': s.label, 'data-split': s.split,
                            d: `M${left},${y(m.mean)} L${right - 10},${y(m.mean)}`}));
    }
    // Per-seed points, spread a little sideways so equal values stay apart;
    // past MAX_PLOT_POINTS in all only the means are drawn.
    if (!tooMany) {
      const seeds = [...new Set(s.points.map(p => p.seed))].sort((a, b) => a - b);
      for (const p of s.points) {
        const spread = (seeds.indexOf(p.seed) - (seeds.length - 1) / 2) * 3;
        const px = (s.hasRank ? x(p.rank) : xNoRank) + spread + (s.split === 'test' ? 8 : 0);
        g.append(svg(s.split === 'test' ? 'rect' : 'circle',
                     s.split === 'test'
                         ? {class: 'point', x: px - 2, y: y(p.value) - 2, width: 4, height: 4, fill: s.color}
                         : {class: 'point', cx: px, cy: y(p.value), r: 2, fill: 'none', stroke: s.color},
                     svg('title', {}, `${s.label}${s.hasRank ? ` rank ${p.rank}` : ''} seed ${p.seed}: ${fmtNum(p.value)}`)));
      }
    }
    root.append(g);
  }
  // The legend sits right of the plot area, so it never covers a label; an
  // entry, clicked, hides or shows its series.
  series.forEach((s, i) => {
    const ly = top + 8 + i * 20;
    const key = keyOf(s);
    const off = hidden.has(key);
    const entry = svg('g', {class: off ? 'legend-entry off' : 'legend-entry', 'data-key': key,
                            'data-hidden': off ? 'true' : 'false', role: 'button'});
    entry.append(svg('rect', {class: 'legend-hit', x: right + 4, y: ly - 9, width: legendW - 8, height: 18}));
    entry.append(svg('line', {class: 'series-key',
                              x1: right + 8, x2: right + 34, y1: ly, y2: ly, stroke: s.color,
                              'stroke-width': 2, 'stroke-dasharray': s.split === 'test' ? '6 4' : (s.hasRank ? null : '1 4')}));
    const text = `${s.label}${s.split === 'test' ? ' (test)' : ''}`;
    entry.append(svg('text', {class: 'legend', x: right + 40, y: ly + 4},
                     text.length > 30 ? text.slice(0, 29) + '…' : text, svg('title', {}, `${text}: click to ${off ? 'show' : 'hide'}`)));
    entry.addEventListener('click', () => {
      if (hidden.has(key)) hidden.delete(key); else hidden.add(key);
      if (opts.onToggle) opts.onToggle();
    });
    root.append(entry);
  });
  if (!series.length) {
    root.append(svg('text', {x: (left + right) / 2, y: H / 2, 'text-anchor': 'middle'}, 'no results yet'));
  }
  return root;
}

// Learning curves of one head and rank: curves is /api/sweeps/ID/curves's
// [{cell_id, seed, recipe, step: [...], train_error: [...], ...}]. Each seed
// is a thin line (the chosen cell's drawn over the others, thicker), their
// mean over seeds at each step bold (a seed that stopped early keeps its
// last value). metric: 'train_error', 'test_error' or 'loss'.
function renderCurves(curves, metric, chosenCell, opts) {
  const W = 760, H = 300, left = 52, top = 14, bottom = 44, right = W - 20;
  const root = svg('svg', {class: 'plot', id: opts.id, viewBox: `0 0 ${W} ${H}`, role: 'img',
                           'aria-label': opts.title || 'learning curves'});
  const lines = curves.filter(c => c[metric]).map(c => ({c, points: c.step.map((s, i) => [s, c[metric][i]])}));
  const lastStep = Math.max(1, ...lines.flatMap(l => l.points.map(p => p[0])));
  const top_v = metric === 'loss' ? Math.max(1e-9, ...lines.flatMap(l => l.points.map(p => p[1]))) : 1;
  const x = s => left + s / lastStep * (right - left);
  const y = v => top + (1 - Math.min(1, Math.max(0, v / top_v))) * (H - top - bottom);
  for (const f of [0, 0.5, 1]) {
    root.append(svg('line', {class: 'gridline', x1: left, x2: right, y1: y(f * top_v), y2: y(f * top_v)}));
    root.append(svg('text', {x: left - 6, y: y(f * top_v) + 4, 'text-anchor': 'end'}, fmtNum(f * top_v)));
  }
  root.append(svg('line', {class: 'axis', x1: left, x2: right, y1: y(0), y2: y(0)}));
  for (const f of [0, 0.25, 0.5, 0.75, 1]) {
    root.append(svg('text', {class: 'xtick', x: x(f * lastStep), y: y(0) + 16, 'text-anchor': 'middle'},
                    String(Math.round(f * lastStep))));
  }
  root.append(svg('text', {x: (left + right) / 2, y: H - 8, 'text-anchor': 'middle'}, 'training step'));
  const path = pts => pts.map((p, j) => `${j ? 'L' : 'M'}${x(p[0])},${y(p[1])}`).join(' ');
  const ordered = [...lines].sort((a, b) => (a.c.cell_id === chosenCell) - (b.c.cell_id === chosenCell));
  for (const l of ordered) {
    const chosen = l.c.cell_id === chosenCell;
    root.append(svg('path', {class: chosen ? 'curve-line chosen' : 'curve-line', d: path(l.points),
                             'data-seed': l.c.seed, stroke: '#0072B2', fill: 'none',
                             'stroke-width': chosen ? 2 : 1, 'stroke-opacity': chosen ? 0.9 : 0.35},
                     svg('title', {}, `seed ${l.c.seed}`)));
  }
  // The mean over seeds at every step any of them evaluated.
  const steps = [...new Set(lines.flatMap(l => l.points.map(p => p[0])))].sort((a, b) => a - b);
  const mean = steps.map(s => {
    const vals = lines.map(l => { let v = null; for (const p of l.points) { if (p[0] <= s) v = p[1]; else break; } return v; })
                      .filter(v => v !== null);
    return [s, vals.reduce((a, b) => a + b, 0) / vals.length];
  });
  if (mean.length) {
    root.append(svg('path', {class: 'curve-mean', d: path(mean), stroke: '#0072B2', fill: 'none', 'stroke-width': 3}));
  }
  if (!lines.length) {
    root.append(svg('text', {x: (left + right) / 2, y: H / 2, 'text-anchor': 'middle'}, 'no learning curve for these seeds'));
  }
  return root;
}

// The metrics a sweep's plot may show: error (train, and test with a test
// split: the summary's means and 95% intervals), and per-seed metrics whose
// means over seeds are taken here (no band). unit: the values are in 0..1.
function metricChoices(sweep) {
  return [{key: 'error', label: 'Error', axis: 'error (1 − exact-sequence accuracy)', unit: true},
          {key: 'train_position_accuracy', label: 'Position accuracy', axis: 'train position accuracy', unit: true},
          {key: 'final_loss', label: 'Final loss', axis: 'final training loss', unit: false}]
      .concat((sweep.row_metrics || []).map(m => ({key: m.key, label: m.label, axis: m.label, unit: false})));
}

// The mean over seeds at each rank of points [{rank, value}].
function meansOf(points) {
  const by = new Map();
  for (const p of points) {
    if (!by.has(p.rank)) by.set(p.rank, []);
    by.get(p.rank).push(p.value);
  }
  return [...by].map(([rank, v]) => ({rank, mean: v.reduce((a, b) => a + b, 0) / v.length, ci95: null}));
}

// The series of one sweep for renderPlot: per head and recipe (one recipe
// without axes); for the error, train (and test when the dataset has a test
// split) with means from the summary, for another metric (a row key) one
// series with means over the rows; points from the rows. With recipe axes a
// series is labelled "kernel/elu1 lr=0.003". Rows a quarantine invalidated
// (state INVALID) are never drawn, as the summary never counts them.
function sweepSeries(sweep, summary, rows, colorOffset, labelPrefix, metric) {
  const series = [];
  const byError = !metric || metric === 'error';
  const splits = !byError ? ['train'] : sweep.has_test_split ? ['train', 'test'] : ['train'];
  const recipes = sweep.recipes && sweep.recipes.length ? sweep.recipes : [{recipe: 0, label: ''}];
  let line = 0;
  summary.heads.forEach((h) => {
    for (const recipe of recipes) {
      const color = COLORS[(colorOffset + line++) % COLORS.length];
      const label = (labelPrefix || '') + h.head + (recipe.label ? ` ${recipe.label}` : '');
      for (const split of splits) {
        const key = byError ? `${split}_error` : metric;
        const points = rows.filter(r => r.head_index === h.head_index && (r.recipe || 0) === recipe.recipe &&
                                        r.state === 'DONE' && r[key] !== null && r[key] !== undefined)
            .map(r => ({rank: r.rank, seed: r.seed, value: r[key]}));
        const means = byError
            ? h.groups.filter(g => (g.recipe || 0) === recipe.recipe && g[key] !== null)
                .map(g => ({rank: g.rank, mean: g[key].mean, ci95: g[key].ci95}))
            : meansOf(points);
        series.push({label, color, split, hasRank: h.has_rank, means, points});
      }
    }
  });
  return series;
}

function boundsOf(summary) {
  return summary.facts ? {lower: summary.facts.rank_lower_bound, upper: summary.facts.rank_upper_bound} : null;
}

// ------------------------------------------------------------------ pages

const pages = {};
let cleanup = [];
function onLeave(fn) { cleanup.push(fn); }

function sweepColumns(selectable, selected, onSelect) {
  const cols = [
    {key: 'name', label: 'Sweep', value: s => s.name,
     cell: s => el('span', {}, el('a', {href: `#/sweep/${s.id}`, class: 'sweep-link'}, s.name), ' ',
                   el('span', {class: 'muted'}, s.id), s.archived ? [' ', badge('archived', 'archived')] : null,
                   (s.tags || []).map(t => [' ', el('span', {class: 'tag'}, t)]))},
    {key: 'state', label: 'State', value: s => s.state, cell: s => badge(s.state)},
    {key: 'owner', label: 'Owner', value: s => s.owner, cell: s => s.owner || '–'},
    {key: 'progress', label: 'Done / total', value: s => s.counts.total ? s.counts.done / s.counts.total : 0,
     cell: s => el('span', {}, progressBar(s), `${s.counts.done} / ${s.counts.total}`,
                   s.counts.failed ? el('span', {class: 'error'}, ` ${s.counts.failed} failed`) : null)},
    {key: 'eta', label: 'ETA', num: true, value: s => s.eta_seconds, cell: s => s.state === 'RUNNING' ? (s.eta || '?') : '–'},
    {key: 'created', label: 'Created', value: s => s.created_unix_ms, cell: s => fmtTime(s.created_unix_ms)},
  ];
  if (selectable) {
    cols.unshift({key: 'pick', label: '', value: s => selected.has(s.id) ? 0 : 1,
                  cell: s => el('input', {type: 'checkbox', class: 'pick', 'data-id': s.id,
                                          checked: selected.has(s.id),
                                          onchange: e => onSelect(s.id, e.target.checked)})});
  }
  return cols;
}

pages.sweeps = async (main) => {
  const selected = new Set();
  const button = el('button', {id: 'compare-button', disabled: true,
                               onclick: () => { location.hash = `#/compare/${[...selected].join(',')}`; }},
                    'Compare selected');
  const table = new SortableTable('sweeps-table', sweepColumns(true, selected, (id, on) => {
    if (on) selected.add(id); else selected.delete(id);
    button.disabled = selected.size < 1;
  }));
  // Search and filters go to the coordinator (state, tag, search) and the
  // dashboard (owner); the tag and owner choices are those seen so far.
  const search = el('input', {id: 'list-search', type: 'search', placeholder: 'search id, name, owner, note, tag…'});
  const state = el('select', {id: 'list-state'}, el('option', {value: ''}, 'any state'),
                   ['RUNNING', 'DONE', 'FAILED', 'CANCELLED'].map(s => el('option', {value: s}, s.toLowerCase())));
  const tag = el('select', {id: 'list-tag'}, el('option', {value: ''}, 'any tag'));
  const owner = el('select', {id: 'list-owner'}, el('option', {value: ''}, 'any owner'));
  const archived = el('input', {id: 'list-archived', type: 'checkbox'});
  const known = {tag: new Set(), owner: new Set()};
  const addChoices = (select, set, values) => {
    for (const v of values) {
      if (!v || set.has(v)) continue;
      set.add(v);
      select.append(el('option', {value: v}, v));
    }
  };
  const count = el('span', {id: 'sweep-count', class: 'muted'});
  main.append(el('h1', {}, 'Sweeps'),
              el('div', {class: 'sub'}, 'Newest first; refreshed every 5 s. Tick sweeps to overlay them on one plot.'),
              el('div', {class: 'card'},
                 el('div', {class: 'filters'}, search, state, tag, owner,
                    el('label', {class: 'toggle'}, archived, ' archived too'), count,
                    el('span', {class: 'right'}, button)),
                 el('div', {class: 'scroll'}, table.table)));
  let generation = 0;  // a reply to an older filter draws nothing
  const load = async () => {
    const q = new URLSearchParams();
    if (search.value.trim()) q.set('search', search.value.trim());
    if (state.value) q.set('state', state.value.toLowerCase());
    if (tag.value) q.set('tag', tag.value);
    if (owner.value) q.set('owner', owner.value);
    if (archived.checked) q.set('archived', 'true');
    const mine = ++generation;
    const sweeps = await api(`/api/sweeps?${q}`);
    if (mine !== generation) return;
    addChoices(tag, known.tag, sweeps.flatMap(s => s.tags));
    addChoices(owner, known.owner, sweeps.map(s => s.owner));
    table.setRows(sweeps);
    const filtered = [...q.keys()].some(k => k !== 'archived');
    count.textContent = `${counted(sweeps.length, 'sweep')}${filtered ? ' match' : ''}`;
  };
  const loadNow = keepLoading(load, 5000);
  await loadNow.first;
  let typing = null;
  search.addEventListener('input', () => { clearTimeout(typing); typing = setTimeout(loadNow, 250); });
  for (const f of [state, tag, owner, archived]) f.addEventListener('change', loadNow);
  onLeave(() => clearTimeout(typing));
};

pages.sweep = async (main, id) => {
  let sweep = await api(`/api/sweeps/${id}`);
  const header = el('div');
  const progress = el('div', {id: 'progress', 'data-state': sweep.state});
  const events = el('ul', {class: 'events', id: 'events'});
  // The plot's metric and scale are choices; a legend entry, clicked,
  // hides or shows its series.
  const metricSelect = el('select', {id: 'plot-metric'}, metricChoices(sweep).map(m => el('option', {value: m.key}, m.label)));
  const logToggle = el('input', {id: 'plot-logy', type: 'checkbox'});
  const hidden = new Set();
  const plotTitle = el('h2', {}, 'Error against rank');
  const plotCard = el('div', {class: 'card'}, plotTitle,
                      el('div', {class: 'filters'}, metricSelect, el('label', {class: 'toggle'}, logToggle, ' log scale')),
                      el('div', {id: 'plot-holder'}),
                      el('div', {class: 'note'}, 'Lines join the mean over seeds at adjacent swept ranks (a gap between ticks was not swept); ' +
                         'the band is its 95% interval; circles are train seeds, squares test seeds; dashed lines are test error. ' +
                         'Click a legend entry to hide or show its line.'));
  const summaryCard = el('div', {class: 'card'}, el('h2', {}, 'Summary'), el('div', {id: 'summary-holder'}));
  const failures = el('div', {class: 'card'}, el('h2', {}, 'Failures'), el('div', {id: 'failures'}));
  const manage = el('div', {class: 'card', id: 'manage'});

  const headSelect = el('select', {id: 'filter-head'}, el('option', {value: ''}, 'all heads'),
                        sweep.heads.map(h => el('option', {value: h.label}, h.label)));
  const stateSelect = el('select', {id: 'filter-state'}, el('option', {value: ''}, 'done and failed'),
                         el('option', {value: 'DONE'}, 'done'), el('option', {value: 'FAILED'}, 'failed'));
  const textFilter = el('input', {id: 'filter-text', type: 'search', placeholder: 'filter: any cell contains…'});
  // Rows a quarantine invalidated: listed on request, never in the plot or
  // the summary; the downloads follow the toggle.
  const invalidToggle = el('input', {id: 'filter-invalid', type: 'checkbox'});
  const invalidLabel = el('label', {class: 'toggle', title: 'results a quarantine invalidated: listed here, never in the plot or the summary'},
                          invalidToggle, ' include invalid');
  const csv = el('a', {id: 'download-csv', class: 'button', download: true}, 'CSV');
  const json = el('a', {id: 'download-json', class: 'button', download: true}, 'JSON');
  const count = el('span', {id: 'row-count', class: 'muted'});
  const columns = [
    {key: 'head', label: 'Head'},
    {key: 'rank', label: 'Rank', num: true},
    {key: 'seed', label: 'Seed', num: true},
    {key: 'state', label: 'State', cell: r => badge(r.state)},
    {key: 'train_error', label: 'Train error', num: true},
    {key: 'test_error', label: 'Test error', num: true},
    {key: 'train_position_accuracy', label: 'Position acc.', num: true},
    {key: 'final_loss', label: 'Final loss', num: true},
    {key: 'steps', label: 'Steps', num: true},
    {key: 'wall_seconds', label: 'Seconds', num: true},
    {key: 'worker_id', label: 'Worker', cell: r => r.cached ? 'cache' : r.worker_id},
    // A failed cell's reason; for an INVALID row, who invalidated it and when.
    {key: 'failure', label: 'Note', wrap: true, cell: r => r.failure ? el('span', {class: 'muted'}, r.failure) : '–'},
  ];
  // The optional metrics the coordinator knows (first exact step, ...),
  // after Steps.
  columns.splice(columns.findIndex(c => c.key === 'steps') + 1, 0,
                 ...(sweep.row_metrics || []).map(m => ({key: m.key, label: m.label, num: true})));
  // With recipe axes, a column per axis after Seed holding the row's recipe's
  // value (rows carry the recipe's index; loadResults fills axis_NAME).
  const axes = sweep.axes || [];
  columns.splice(columns.findIndex(c => c.key === 'seed') + 1, 0,
                 ...axes.map(a => ({key: `axis_${a.name}`, label: a.name, num: true})));
  // Without a test split every test error is missing: no column for it.
  if (!sweep.has_test_split) columns.splice(columns.findIndex(c => c.key === 'test_error'), 1);
  // A done row, clicked, shows the learning curves of its head and rank.
  const curvesHolder = el('div', {id: 'curves-holder'},
                          el('span', {class: 'muted'}, 'Click a done row below for its learning curves.'));
  const curvesCard = el('div', {class: 'card', id: 'curves-card'}, el('h2', {}, 'Learning curves'), curvesHolder);
  const showCurves = async (row) => {
    if (row.state !== 'DONE') return;
    const q = new URLSearchParams({head: row.head, rank: String(row.rank === null ? 0 : row.rank)});
    let curves;
    try {
      curves = await api(`/api/sweeps/${id}/curves?${q}`);
    } catch (err) {
      curvesHolder.replaceChildren(errorCard(err));
      return;
    }
    if (left) return;
    const sameRecipe = curves.filter(c => (c.recipe || 0) === (row.recipe || 0));
    const metricSelect = el('select', {id: 'curve-metric'},
        ['train_error', 'test_error', 'loss'].filter(m => m !== 'test_error' || sweep.has_test_split)
            .map(m => el('option', {value: m}, m.replace('_', ' '))));
    const draw = () => plotHolder.replaceChildren(
        renderCurves(sameRecipe, metricSelect.value, row.cell_id, {id: 'curves', title: `${row.head} rank ${row.rank}`}));
    const plotHolder = el('div');
    metricSelect.addEventListener('change', draw);
    curvesHolder.replaceChildren(
        el('div', {class: 'filters'}, el('strong', {}, `${row.head}${row.rank === null ? '' : ` rank ${row.rank}`}`),
           el('span', {class: 'muted'}, ` seed ${row.seed} highlighted; ${sameRecipe.length} seeds`), metricSelect),
        plotHolder);
    draw();
  };
  const rowsTable = new SortableTable('rows', columns, r => r.state === 'INVALID' ? 'invalid' : null, showCurves);
  let rows = [];  // with the invalid ones, which come last
  const applyFilters = () => {
    const head = headSelect.value, state = stateSelect.value, text = textFilter.value.trim().toLowerCase();
    const withInvalid = invalidToggle.checked;
    const invalid = rows.filter(r => r.state === 'INVALID').length;
    const listed = withInvalid ? rows : rows.filter(r => r.state !== 'INVALID');
    // The state filter keeps the invalid rows, as the downloads (and the
    // CLI's --state with --include-invalid) do.
    const shown = listed.filter(r => (!head || r.head === head) && (!state || r.state === state || r.state === 'INVALID') &&
        (!text || columns.some(c => String(r[c.key] ?? '').toLowerCase().includes(text))));
    rowsTable.setRows(shown);
    count.textContent = `${shown.length} of ${listed.length} rows` +
        (invalid ? (withInvalid ? ` (${invalid} invalid)` : ` (${invalid} invalid not shown)`) : '') +
        (shown.length > MAX_TABLE_ROWS ? ` (the first ${MAX_TABLE_ROWS} shown; sort, filter or download for the rest)` : '');
    const q = new URLSearchParams();
    if (head) q.set('head', head);
    if (state) q.set('state', state.toLowerCase());
    if (withInvalid) q.set('include_invalid', 'true');
    q.set('format', 'csv'); csv.href = `/api/sweeps/${id}/results?${q}`;
    q.set('format', 'json'); json.href = `/api/sweeps/${id}/results?${q}`;
  };
  for (const f of [headSelect, stateSelect, invalidToggle]) f.addEventListener('change', applyFilters);
  textFilter.addEventListener('input', applyFilters);
  const tableCard = el('div', {class: 'card'}, el('h2', {}, 'Per-seed results'),
                       el('div', {class: 'filters'}, headSelect, stateSelect, textFilter, invalidLabel, count,
                          el('span', {class: 'right'}, 'Download ', csv, ' ', json)),
                       el('div', {class: 'scroll'}, rowsTable.table));
  main.append(header, el('div', {class: 'card'}, el('h2', {}, 'Progress'), progress, events),
              el('div', {class: 'grid2'}, plotCard, summaryCard), tableCard, curvesCard, failures, manage);

  const drawHeader = () => {
    header.replaceChildren(el('h1', {id: 'sweep-name'}, sweep.name),
        el('div', {class: 'sub'}, el('span', {id: 'sweep-state'}, badge(sweep.state)), el('span', {}, sweep.id),
           el('span', {}, `owner ${sweep.owner || '–'}`), el('span', {}, `${sweep.dataset} dataset`),
           el('span', {}, `${sweep.mode} mode`), el('span', {}, `${sweep.seeds} seeds`),
           el('span', {}, `created ${fmtTime(sweep.created_unix_ms)}`),
           sweep.archived ? el('span', {}, badge('archived', 'archived')) : null,
           el('span', {id: 'sweep-tags'}, (sweep.tags || []).map(t => el('span', {class: 'tag'}, t)))),
        sweep.note ? el('div', {class: 'note-text', id: 'sweep-note'}, sweep.note) : null);
    drawManage();
  };
  // Managing the sweep: for the browser that opened the manage link; a
  // viewer is told how to become one. Every action reads the sweep again.
  // The last action's outcome; it stays when the card is drawn again.
  let said = {text: '', isError: false};
  const message = (text, isError) => {
    said = {text, isError};
    const m = document.getElementById('manage-message');
    m.textContent = text;
    m.className = isError ? 'error' : 'muted';
  };
  const doAction = async (verb, body, done) => {
    try {
      const out = await act(`/api/sweeps/${id}/${verb}`, body);
      if (left) return;
      message(done(out), false);
      await refresh();
    } catch (e) {
      if (!left) message(e.message, true);
    }
  };
  const drawManage = () => {
    if (!session.canAct) {
      manage.replaceChildren(el('h2', {}, 'Manage'), el('div', {class: 'muted', id: 'manage-readonly'},
          session.readOnly ? 'This dashboard is read-only (ranksweep ui --read-only).'
                           : 'You are a viewer: open the manage link `ranksweep ui` printed to change this sweep.'));
      return;
    }
    const c = sweep.counts;
    const note = el('textarea', {id: 'note-input', rows: 2, maxlength: 4096}, sweep.note);
    const tagInput = el('input', {id: 'tag-input', placeholder: 'tag'});
    const renameInput = el('input', {id: 'rename-input', value: sweep.name});
    const confirmInput = el('input', {id: 'delete-confirm', placeholder: `type ${sweep.id} to delete`});
    const deleteGo = el('button', {id: 'delete-go', class: 'danger', onclick: () =>
        doAction('delete', {confirm: confirmInput.value}, out => {
          location.hash = '#/sweeps';
          return `deleted ${out.cells_deleted} cells and ${out.results_deleted} results`;
        })}, 'Delete for good');
    const deleteBox = el('span', {id: 'delete-box', hidden: true}, confirmInput, ' ', deleteGo);
    manage.replaceChildren(el('h2', {}, 'Manage'),
      el('div', {class: 'filters'}, el('label', {}, 'Note '), note,
         el('button', {id: 'note-save', onclick: () => doAction('update', {note: note.value}, () => 'note saved')}, 'Save note')),
      el('div', {class: 'filters'}, el('label', {}, 'Tags '),
         (sweep.tags || []).map(t => el('span', {class: 'tag'}, t, ' ',
             el('button', {class: 'tag-remove', 'data-tag': t, title: `remove ${t}`,
                           onclick: () => doAction('update', {remove_tags: [t]}, () => `tag ${t} removed`)}, '×'))),
         tagInput, el('button', {id: 'tag-add', onclick: () =>
             doAction('update', {add_tags: tagInput.value.split(/[\s,]+/).filter(Boolean)}, () => 'tags added')}, 'Add tag')),
      el('div', {class: 'filters'}, el('label', {}, 'Name '), renameInput,
         el('button', {id: 'rename-save', onclick: () => doAction('update', {name: renameInput.value}, () => 'renamed')}, 'Rename')),
      el('div', {class: 'filters'},
         el('button', {id: 'archive-button', onclick: () => doAction('update', {archived: !sweep.archived},
                                                                     () => sweep.archived ? 'unarchived' : 'archived')},
            sweep.archived ? 'Unarchive' : 'Archive'),
         sweep.state === 'RUNNING' ? el('button', {id: 'cancel-button', onclick: () =>
             doAction('cancel', {}, out => `cancelled ${counted(out.cells_cancelled, 'cell')}`)}, 'Cancel sweep') : null,
         el('button', {id: 'retry-failed', disabled: !c.failed, onclick: () =>
             doAction('retry', {failed: true}, out => `retrying ${counted(out.cells_retried, 'cell')}`)}, `Retry ${c.failed} failed`),
         el('button', {id: 'retry-cancelled', disabled: !c.cancelled, onclick: () =>
             doAction('retry', {cancelled: true}, out => `retrying ${counted(out.cells_retried, 'cell')}`)}, `Retry ${c.cancelled} cancelled`),
         el('button', {id: 'delete-button', class: 'danger', disabled: sweep.state === 'RUNNING',
                       title: sweep.state === 'RUNNING' ? 'cancel the sweep first' : 'delete the sweep, its cells and results',
                       onclick: () => { deleteBox.hidden = false; confirmInput.focus(); }}, 'Delete…'),
         deleteBox),
      el('div', {id: 'manage-message', class: said.isError ? 'error' : 'muted'}, said.text));
  };
  // Failed cells with their reasons (from the rows), and the coordinator's
  // recent failed attempts, some of which may have been retried since.
  const drawFailures = () => {
    const failed = rows.filter(r => r.state === 'FAILED');
    const recent = sweep.recent_failures;
    const holder = document.getElementById('failures');
    if (!failed.length && !recent.length) {
      holder.replaceChildren(el('span', {class: 'muted', id: 'no-failures'}, 'none'));
      return;
    }
    holder.replaceChildren(
      el('div', {id: 'failure-count', class: 'muted'}, `${counted(failed.length, 'failed cell')}`),
      failed.length ? el('div', {class: 'scroll'}, el('table', {id: 'failed-cells'},
        el('thead', {}, el('tr', {}, ['Head', 'Rank', 'Seed', 'Attempt', 'Worker', 'Reason'].map(t => el('th', {}, t)))),
        el('tbody', {}, failed.map(r => el('tr', {}, el('td', {}, r.head), el('td', {}, r.rank === null ? '–' : r.rank),
          el('td', {}, r.seed), el('td', {}, r.attempt), el('td', {}, r.worker_id || '–'),
          el('td', {class: 'wrap reason'}, r.failure || '–')))))) : null,
      recent.length ? [el('h3', {}, 'Recent failed attempts'), el('ol', {class: 'failures'}, recent.map(t => el('li', {}, t)))] : null);
  };
  const drawProgress = () => {
    const c = sweep.counts;
    progress.dataset.state = sweep.state;
    progress.dataset.done = c.done;
    progress.dataset.total = c.total;
    const parts = [`${c.done} / ${c.total} done`, `${c.leased} running`, `${c.pending} pending`];
    if (c.failed) parts.push(`${c.failed} failed`);
    if (c.cancelled) parts.push(`${c.cancelled} cancelled`);
    if (c.pruned) parts.push(`${c.pruned} pruned`);
    if (sweep.cached_cells) parts.push(`${sweep.cached_cells} from the result cache`);
    parts.push(sweep.state === 'RUNNING' ? `ETA ${sweep.eta || '?'}` : sweep.state);
    progress.replaceChildren(progressBar(sweep, true), el('span', {id: 'progress-text'}, parts.join(' · ')));
    drawFailures();
  };
  const drawSummary = (summary) => {
    const facts = summary.facts;
    const table = el('table', {id: 'summary'},
      el('thead', {}, el('tr', {}, el('th', {}, 'Head'), el('th', {class: 'num'}, 'Transition rank'),
         sweep.has_test_split ? el('th', {class: 'num'}, 'Test transition') : null, el('th', {}, 'Why'))),
      el('tbody', {}, summary.heads.map(h => el('tr', {},
        el('td', {}, h.head), el('td', {class: 'num'}, h.has_rank ? fmtNum(h.transition_rank) : 'no rank'),
        sweep.has_test_split ? el('td', {class: 'num'}, h.has_rank ? fmtNum(h.test_transition_rank) : 'no rank') : null,
        el('td', {class: 'muted wrap'}, h.reason + (h.caveat ? ` (${h.caveat})` : ''))))));
    const theory = !facts ? 'theory: no cell done yet'
        : (facts.rank_lower_bound === null && facts.rank_upper_bound === null) ? 'theory: no bound for this dataset'
        : `theory: lower bound ${fmtNum(facts.rank_lower_bound)}, upper bound ${fmtNum(facts.rank_upper_bound)}`;
    const meanCi = a => a ? `${fmtNum(a.mean)} ± ${fmtNum(a.ci95)}` : '–';
    const test = sweep.has_test_split;
    const groups = el('table', {id: 'groups'},
      el('thead', {}, el('tr', {}, ['Head', 'Rank'].concat(axes.length ? ['Recipe'] : [])
          .concat(['n', 'Train error ± 95%', 'Exact'])
          .concat(test ? ['Test error ± 95%', 'Test exact'] : [])
          .map((t, i) => el('th', {class: i && t !== 'Recipe' ? 'num' : null}, t)))),
      el('tbody', {}, summary.heads.flatMap(h => h.groups.map(g => el('tr', {},
        el('td', {}, h.head), el('td', {class: 'num'}, g.rank === null ? '–' : g.rank),
        axes.length ? el('td', {class: 'recipe'}, g.recipe_label || `recipe ${g.recipe}`) : null,
        el('td', {class: 'num'}, `${g.n}/${g.expected}`),
        el('td', {class: 'num'}, meanCi(g.train_error)),
        el('td', {class: 'num'}, `${g.exact_seeds}/${g.n}`),
        test ? el('td', {class: 'num'}, meanCi(g.test_error)) : null,
        test ? el('td', {class: 'num'}, `${fmtNum(g.test_exact_seeds)}/${g.n}`) : null)))));
    document.getElementById('summary-holder').replaceChildren(el('div', {class: 'scroll'}, table),
                                                              el('div', {class: 'note', id: 'theory'}, theory),
                                                              el('div', {class: 'scroll'}, groups));
  };
  let loading = null;
  let left = false;  // the page was left: late loads draw nothing
  onLeave(() => { left = true; });
  const loadResults = async () => {
    const [summary, newRows] = await Promise.all([api(`/api/sweeps/${id}/summary`),
                                                  api(`/api/sweeps/${id}/results?include_invalid=true`)]);
    if (left) return;
    for (const r of newRows) {
      const recipe = (sweep.recipes || [])[r.recipe || 0];
      for (const a of axes) r[`axis_${a.name}`] = recipe ? recipe.values[a.name] : null;
    }
    rows = newRows;
    lastSummary = summary;
    applyFilters();
    drawSummary(summary);
    drawFailures();
    drawPlot();
  };
  let lastSummary = null;
  const drawPlot = () => {
    if (!lastSummary) return;
    const metric = metricChoices(sweep).find(m => m.key === metricSelect.value);
    plotTitle.textContent = `${metric.label} against rank`;
    document.getElementById('plot-holder').replaceChildren(
        renderPlot(sweepSeries(sweep, lastSummary, rows, 0, '', metric.key), metric.key === 'error' ? boundsOf(lastSummary) : null,
                   {id: 'plot', title: sweep.name, yLabel: metric.axis, unitRange: metric.unit, logY: logToggle.checked,
                    hidden, onToggle: drawPlot}));
  };
  metricSelect.addEventListener('change', drawPlot);
  logToggle.addEventListener('change', drawPlot);
  // New results reload the table, summary and plot: one load at a time, and
  // the next one no sooner than twice as long as the last took (at least
  // 1 s), so a large sweep finishing cells quickly is not read over and over.
  // main's data-loading says whether a load is under way or due (tests wait
  // for it).
  let again = false;
  const reload = () => {
    if (left) return;
    if (loading) { again = true; return; }
    main.dataset.loading = 'true';
    const started = Date.now();
    // A load that meets an outage starts the page's retries (outage below).
    loading = loadResults().catch(e => { if (left) return; if (isOutage(e)) outage(e); else setStatus(e.message, true); }).finally(() => {
      const pause = Math.max(1000, 2 * (Date.now() - started));
      setTimeout(() => {
        loading = null;
        if (again) { again = false; reload(); } else main.dataset.loading = 'false';
      }, again ? pause : 0);
    });
  };
  drawHeader();
  drawProgress();
  await loadResults();

  // Live progress: the server follows WatchSweep and pushes each event.
  // After any outage (the stream breaks, or ends with an error) the page is
  // marked stale and the sweep is read again, with backoff, until the
  // coordinator answers; a stream that ends is followed by a read too, so
  // the header shows the coordinator's state, never the stream's last word.
  let source = null, attempt = 0, retryTimer = null;
  let lastFinished = sweep.counts.done + sweep.counts.failed;
  const closeSource = () => { if (source) source.close(); source = null; };
  const outage = (err) => {
    closeSource();
    if (left) return;
    attempt++;
    markStale(err, backoff(attempt));
    setStatus('reconnecting…', true);
    clearTimeout(retryTimer);
    retryTimer = setTimeout(refresh, backoff(attempt));
  };
  const follow = () => {
    closeSource();
    if (left || sweep.state !== 'RUNNING') return;
    source = new EventSource(`/api/sweeps/${id}/events`);
    source.addEventListener('progress', (e) => {
      const data = JSON.parse(e.data);
      sweep = Object.assign(data.sweep, {note: sweep.note, tags: sweep.tags, archived: sweep.archived});
      attempt = 0;
      markFresh();
      drawProgress();
      if (data.message) {
        events.prepend(el('li', {}, `${fmtTime(Date.now())}  ${data.message}`));
        while (events.children.length > 50) events.lastChild.remove();
      }
      const finished = sweep.counts.done + sweep.counts.failed;
      if (finished !== lastFinished) { lastFinished = finished; reload(); }
      setStatus('live');
    });
    source.addEventListener('end', (e) => {
      const data = JSON.parse(e.data);
      closeSource();
      if (data.error) outage(new Error(`the coordinator's event stream ended: ${data.error}`));
      else refresh();
    });
    source.onerror = () => outage(new Error('the event stream from the dashboard broke'));
  };
  const refresh = async () => {
    retryTimer = null;
    let fresh;
    try {
      fresh = await api(`/api/sweeps/${id}`);
    } catch (e) {
      if (isOutage(e)) outage(e); else if (!left) setStatus(e.message, true);
      return;
    }
    if (left) return;
    sweep = fresh;
    attempt = 0;
    markFresh();
    drawHeader();
    drawProgress();
    lastFinished = sweep.counts.done + sweep.counts.failed;
    reload();
    if (sweep.state === 'RUNNING') follow(); else setStatus(`sweep ${sweep.state}`);
  };
  follow();
  onLeave(() => { closeSource(); clearTimeout(retryTimer); });
};

pages.compare = async (main, arg) => {
  const ids = (arg || '').split(',').filter(Boolean);
  main.append(el('h1', {}, 'Compare'));
  if (!ids.length) {
    main.append(el('div', {class: 'sub'}, 'Tick two or more sweeps on the Sweeps page and press "Compare selected", ',
                       'or open #/compare/ID,ID.'));
    const sweeps = await api('/api/sweeps');
    main.append(el('div', {class: 'card'}, el('ul', {}, sweeps.map(s =>
        el('li', {}, el('a', {href: `#/compare/${s.id}`}, s.name), ' ', el('span', {class: 'muted'}, s.id))))));
    return;
  }
  const split = el('select', {id: 'compare-split'}, el('option', {value: 'train'}, 'train error'),
                   el('option', {value: 'test'}, 'test error'));
  const logToggle = el('input', {id: 'plot-logy', type: 'checkbox'});
  const hidden = new Set();
  const holder = el('div', {id: 'plot-holder'});
  const list = el('div', {id: 'compare-list'});
  const diff = el('div', {id: 'diff-holder'});
  main.append(el('div', {class: 'sub'}, `${counted(ids.length, 'sweep')} on one plot: one line per sweep and head.`),
              el('div', {class: 'card'}, el('div', {class: 'filters'}, split, el('label', {class: 'toggle'}, logToggle, ' log scale')), holder,
                 el('div', {class: 'note'}, 'Means over seeds with their 95% band; points are seeds. Click a legend entry to hide or show its line.')),
              el('div', {class: 'card'}, el('h2', {}, 'Sweeps'), list),
              el('div', {class: 'card'}, el('h2', {}, 'Configuration'), diff));
  const data = await Promise.all(ids.map(async id => {
    const [sweep, summary, rows] = await Promise.all([api(`/api/sweeps/${id}`), api(`/api/sweeps/${id}/summary`),
                                                     api(`/api/sweeps/${id}/results?state=done`)]);
    return {sweep, summary, rows};
  }));
  const draw = () => {
    let offset = 0;
    const series = [];
    for (const d of data) {
      const s = sweepSeries(d.sweep, d.summary, d.rows, offset, `${d.sweep.name} · `)
          .filter(x => x.split === split.value);
      offset += d.summary.heads.length * Math.max(1, (d.sweep.recipes || []).length);
      series.push(...s);
    }
    const bounds = data.length === 1 ? boundsOf(data[0].summary) : null;
    holder.replaceChildren(renderPlot(series, bounds, {id: 'plot', yLabel: `${split.value} error`, unitRange: true,
                                                       logY: logToggle.checked, hidden, onToggle: draw}));
  };
  split.addEventListener('change', draw);
  logToggle.addEventListener('change', draw);
  draw();
  diff.replaceChildren(...configDiff(data.map(d => d.sweep)));
  list.replaceChildren(el('table', {}, el('thead', {}, el('tr', {}, ['Sweep', 'State', 'Done / total', 'Transition ranks']
      .map(t => el('th', {}, t)))), el('tbody', {}, data.map(d => el('tr', {},
      el('td', {}, el('a', {href: `#/sweep/${d.sweep.id}`}, d.sweep.name), ' ', el('span', {class: 'muted'}, d.sweep.id)),
      el('td', {}, badge(d.sweep.state)), el('td', {}, `${d.sweep.counts.done} / ${d.sweep.counts.total}`),
      el('td', {}, d.summary.heads.filter(h => h.has_rank).map(h => `${h.head}: ${fmtNum(h.transition_rank)}`).join(', ') || '–'))))));
};

// The settings of sweeps' specs, flattened to dotted keys ("train.lr",
// "heads[0].kind"): a table of those that differ (one column per sweep; a
// setting one of them lacks is "–") and how many are the same.
function flatten(value, prefix, out) {
  if (value !== null && typeof value === 'object' && !(Array.isArray(value) && value.every(v => typeof v !== 'object'))) {
    for (const [k, v] of Object.entries(value)) flatten(v, Array.isArray(value) ? `${prefix}[${k}]` : (prefix ? `${prefix}.${k}` : k), out);
  } else {
    out[prefix] = JSON.stringify(value);
  }
  return out;
}
function configDiff(sweeps) {
  const flat = sweeps.map(s => flatten(s.spec, '', {}));
  const keys = [...new Set(flat.flatMap(f => Object.keys(f)))].sort();
  const differ = keys.filter(k => flat.some(f => f[k] !== flat[0][k]));
  const same = keys.length - differ.length;
  const note = el('div', {class: 'note', id: 'config-same'},
                  sweeps.length < 2 ? 'One sweep: nothing to compare.'
                  : `${differ.length} setting${differ.length === 1 ? '' : 's'} differ; ${same} are the same.`);
  if (sweeps.length < 2 || !differ.length) return [note];
  return [el('div', {class: 'scroll'}, el('table', {id: 'config-diff'},
    el('thead', {}, el('tr', {}, el('th', {}, 'Setting'), sweeps.map(s => el('th', {}, s.name)))),
    el('tbody', {}, differ.map(k => el('tr', {'data-key': k}, el('td', {}, k),
      flat.map(f => el('td', {class: 'wrap'}, f[k] === undefined ? '–' : f[k].replace(/^"(.*)"$/, '$1')))))))), note];
}

pages.workers = async (main) => {
  const table = new SortableTable('workers-table', [
    {key: 'id', label: 'Worker'},
    {key: 'hostname', label: 'Host'},
    {key: 'device', label: 'Device',
     cell: w => w.device_name && w.device_name !== w.device ? `${w.device} (${w.device_name})` : w.device},
    {key: 'slots', label: 'Slots', num: true},
    {key: 'memory_bytes', label: 'Memory', num: true, cell: w => fmtBytes(w.memory_bytes)},
    {key: 'leased_cells', label: 'Running', num: true},
    {key: 'completed_cells', label: 'Cells done', num: true},
    {key: 'version', label: 'Version', value: w => w.version.build_id,
     cell: w => `${w.version.build_id} · torch ${w.version.torch || '?'}${w.version.cuda ? ` · CUDA ${w.version.cuda}` : ''}`},
    {key: 'last_seen', label: 'Last seen', value: w => w.last_seen_ago_seconds, cell: w => fmtAgo(w.last_seen_ago_seconds)},
    {key: 'alive', label: 'Alive', value: w => w.alive ? 0 : 1, cell: w => w.alive ? badge('alive') : badge('gone', 'dead')},
    // A quarantine's hold: the worker leases and completes nothing until an
    // admin runs `ranksweep workers unquarantine`.
    {key: 'standing', label: 'Standing', value: w => w.quarantined_unix_ms ? 2 : w.token_held_by ? 1 : 0,
     cell: w => w.quarantined_unix_ms ? badge('quarantined', 'INVALID')
       : w.token_held_by ? badge(`held (token of ${w.token_held_by})`, 'INVALID') : badge('good', 'alive')},
  ]);
  const count = el('span', {id: 'worker-count', class: 'muted'});
  main.append(el('h1', {}, 'Workers'), el('div', {class: 'sub'}, 'Every worker that registered; refreshed every 5 s.'),
              el('div', {class: 'card'}, el('div', {class: 'filters'}, count), el('div', {class: 'scroll'}, table.table)));
  await keepLoading(async () => {
    const workers = await api('/api/workers');
    table.setRows(workers);
    const held = workers.filter(w => w.quarantined_unix_ms || w.token_held_by).length;
    count.textContent = `${counted(workers.length, 'worker')}, ${workers.filter(w => w.alive).length} alive` +
      (held > 0 ? `, ${held} quarantined or held` : '');
  }, 5000).first;
};

// ------------------------------------------------------------------ routing

let routeAttempt = 0, routeTimer = null;
async function route() {
  for (const fn of cleanup) fn();
  cleanup = [];
  clearTimeout(routeTimer);
  const hash = location.hash;
  const [, page = 'sweeps', arg = ''] = (location.hash || '#/sweeps').match(/^#\/([a-z]*)\/?(.*)$/) || [];
  const name = pages[page] ? page : 'sweeps';
  for (const a of document.querySelectorAll('header nav a')) {
    a.classList.toggle('active', a.dataset.page === (name === 'sweep' ? 'sweeps' : name));
  }
  const main = document.getElementById('main');
  main.replaceChildren();
  main.dataset.page = name;
  main.dataset.ready = 'false';
  setStatus('');
  // A new page shows nothing old: no banner until one of its loads fails.
  freshAt = null;
  document.body.dataset.stale = 'false';
  document.getElementById('stale').hidden = true;
  try {
    await loadSession();
    await pages[name](main, decodeURIComponent(arg));
    routeAttempt = 0;
    // Pages that keep loading mark themselves; the others were read whole.
    if (document.body.dataset.stale !== 'true') markFresh();
  } catch (e) {
    if (isOutage(e)) {
      // Nothing of this page could be read: the banner says why, and the
      // page is read again, with backoff, until it can be.
      routeAttempt++;
      const wait = backoff(routeAttempt);
      main.replaceChildren(el('div', {class: 'card muted', id: 'waiting'}, 'Waiting for the coordinator…'));
      markStale(e, wait);
      routeTimer = setTimeout(() => { if (location.hash === hash) route(); }, wait);
    } else {
      main.append(errorCard(e));
      setStatus('error', true);
    }
  }
  main.dataset.ready = 'true';
}

takeKeyFromLink();
// A manage link opened on a page already open is a hash change.
window.addEventListener('hashchange', () => { takeKeyFromLink(); routeAttempt = 0; route(); });
route();
