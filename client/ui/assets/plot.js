// The dashboard's plots: a metric against rank (renderPlot), learning
// curves (renderCurves), and the series a sweep's rows make. Uses common.js.
'use strict';

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
