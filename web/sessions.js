// The sessions page: every session with units, labeled / total per annotator, a bar each.

import * as api from './api.js';
import { h, page } from './dom.js';
import { searchBox } from './search.js';

/** A progress bar of `labeled` out of `total` (drawn with a width set in JS, not inline CSS). */
export function bar(labeled, total, label) {
  const fill = h('span', { class: 'fill' });
  fill.style.width = `${total ? (100 * labeled) / total : 0}%`;
  return h('span', {
    class: 'bar', role: 'progressbar', 'aria-label': label,
    'aria-valuemin': 0, 'aria-valuemax': total, 'aria-valuenow': labeled,
  }, fill);
}

/** Draws the sessions page. */
export async function sessionsPage() {
  const body = await api.get('/api/labels/progress?all=true');
  const rows = body.sessions.map((s) => {
    const id = encodeURIComponent(s.session_id);
    const who = s.annotators.length
      ? s.annotators.map((a) => h('div', { class: 'who-progress' },
        h('span', { class: 'name', text: a.annotator }),
        bar(a.units.labeled, a.units.total, `${a.annotator}: ${a.units.labeled} of ${a.units.total}`),
        h('span', { text: `${a.units.labeled} / ${a.units.total}` })))
      : h('span', { class: 'hint', text: 'nobody yet' });
    return h('tr', {},
      h('th', { scope: 'row' }, h('code', { text: s.session_id })),
      h('td', { text: String(s.units.total) }),
      h('td', {}, bar(s.units.labeled, s.units.total, `${s.units.labeled} of ${s.units.total} labeled`), ` ${s.units.labeled} / ${s.units.total}`),
      h('td', {}, who),
      h('td', { text: String(s.adjudicated) }),
      h('td', {},
        h('a', { href: `/label/${id}`, text: 'Label' }), ' · ',
        h('a', { href: `/review/${id}`, text: 'Review' })));
  });
  page(
    h('h1', { text: 'Sessions' }),
    searchBox(),
    rows.length
      ? h('table', { class: 'grid' },
        h('thead', {}, h('tr', {}, ['Session', 'Units', 'Labeled', 'Per annotator', 'Adjudicated', ''].map((t) => h('th', { scope: 'col', text: t })))),
        h('tbody', {}, rows))
      : h('p', { text: 'No sessions yet: upload one through the API.' }),
  );
}
