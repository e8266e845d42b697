// The page of one sweep (#/sweep/ID): its progress pushed over Server-Sent
// Events, its plots, tables and curves, and the manage actions. Registered
// in pages (pages.js); uses common.js and plot.js.
'use strict';

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
