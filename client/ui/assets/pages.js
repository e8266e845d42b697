// The dashboard's pages but a sweep's own (sweep_page.js): the sweep list,
// the comparison of sweeps and the workers. Each page is pages[NAME], an
// async function of the <main> element and the hash's argument; app.js
// routes to it. Uses common.js and plot.js.
'use strict';

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
