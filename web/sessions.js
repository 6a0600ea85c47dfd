// The sessions page: every session (its file, framework, project, units, latest change)
// with labeled / total per annotator, a bar each.

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

/** An RFC 3339 time as `YYYY-MM-DD HH:MM` in the browser's time zone (an en dash for none). */
export function when(iso) {
  const t = iso ? new Date(iso) : null;
  if (!t || Number.isNaN(t.getTime())) return '–';
  const two = (n) => String(n).padStart(2, '0');
  return `${t.getFullYear()}-${two(t.getMonth() + 1)}-${two(t.getDate())} ${two(t.getHours())}:${two(t.getMinutes())}`;
}

/** The latest change of a listed session: its latest label, else its log's time. */
function lastChange(s) {
  const labeled = s.last_labeled_at && s.last_labeled_at > s.modified_at;
  return h('span', {
    class: 'when',
    title: `log written ${when(s.modified_at)}; latest label ${when(s.last_labeled_at)}`,
    text: `${when(labeled ? s.last_labeled_at : s.modified_at)} (${labeled ? 'label' : 'log'})`,
  });
}

function row(s) {
  const id = encodeURIComponent(s.session_id);
  const who = s.annotators.length
    ? s.annotators.map((a) => h('div', { class: 'who-progress' },
      h('span', { class: 'name', text: a.annotator }),
      bar(a.units.labeled, a.units.total, `${a.annotator}: ${a.units.labeled} of ${a.units.total}`),
      h('span', { text: `${a.units.labeled} / ${a.units.total}` })))
    : h('span', { class: 'hint', text: 'nobody yet' });
  return h('tr', { dataset: { session: s.session_id } },
    h('th', { scope: 'row' },
      h('div', { class: 'file', text: s.file_name || s.session_id }),
      h('code', { class: 'hint', text: s.session_id })),
    h('td', { text: s.framework }),
    h('td', { text: s.project === null ? 'upload' : (s.project || '(top folder)') }),
    h('td', { text: String(s.units.total) }),
    h('td', {}, bar(s.units.labeled, s.units.total, `${s.units.labeled} of ${s.units.total} labeled`), ` ${s.units.labeled} / ${s.units.total}`),
    h('td', {}, who),
    h('td', { text: String(s.adjudicated) }),
    h('td', {}, lastChange(s)),
    h('td', {},
      h('a', { href: `/label/${id}`, text: 'Label' }), ' · ',
      h('a', { href: `/review/${id}`, text: 'Review' }), ' · ',
      h('a', { href: `/agreement?session=${id}`, text: 'Agreement' })));
}

/** Draws the sessions page: each session's file, framework, project, units, progress and latest change. */
export async function sessionsPage() {
  const body = await api.get('/api/labels/progress?all=true');
  const heads = ['Session', 'Framework', 'Project', 'Units', 'Labeled', 'Per annotator', 'Adjudicated', 'Last change', ''];
  page(
    h('h1', { text: 'Sessions' }),
    searchBox(),
    body.sessions.length
      ? h('table', { class: 'grid', id: 'sessions' },
        h('thead', {}, h('tr', {}, heads.map((t) => h('th', { scope: 'col', text: t })))),
        h('tbody', {}, body.sessions.map(row)))
      : h('p', { text: 'No sessions yet: upload one through the API.' }),
  );
}
