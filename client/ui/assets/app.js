// The dashboard's pages, drawn in the browser from the JSON of /api/ (see
// client/ui/dashboard.h). No framework and nothing from a network: plain DOM
// and SVG. Pages live behind the hash: #/sweeps, #/sweep/ID,
// #/compare/ID,ID..., #/workers.
//
// The scripts, in the order index.html loads them, share one global scope:
// common.js (helpers), plot.js (plots), pages.js (the pages),
// sweep_page.js (a sweep's page), and this one, which routes the hash to a
// page and so runs last.
'use strict';

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
