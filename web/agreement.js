// The agreement page: Krippendorff's alpha and Fleiss' kappa per label and overall, Cohen's
// kappa per pair, with the units behind each; a bar chart; per annotator figures.

import * as api from './api.js';
import { barChart } from './chart.js';
import { labelName } from './codebook.js';
import { figure, h, page } from './dom.js';
import { navigate } from './nav.js';

const table = (heads, rows) => h('table', { class: 'grid' },
  h('thead', {}, h('tr', {}, heads.map((t) => h('th', { scope: 'col', text: t })))),
  h('tbody', {}, rows.map((cells) => h('tr', {}, cells.map((c) => h('td', { text: String(c) }))))));

/**
 * The picker of the session the page is narrowed to: every labeled session (by file name),
 * or all of them; choosing one opens `/agreement?session=ID`.
 */
function sessionPicker(labeled, session) {
  const known = labeled.sessions.some((s) => s.session_id === session);
  const options = [
    h('option', { value: '', text: 'All sessions', selected: !session }),
    session && !known ? h('option', { value: session, text: session, selected: true }) : null,
    labeled.sessions.map((s) => h('option', {
      value: s.session_id,
      text: `${s.file_name || s.session_id} (${s.framework}, ${s.units.labeled} of ${s.units.total} labeled)`,
      selected: s.session_id === session,
    })),
  ];
  const select = h('select', { id: 'agreement-session', 'aria-label': 'Session' }, options);
  select.addEventListener('change', () => {
    navigate(`/agreement${select.value ? `?session=${encodeURIComponent(select.value)}` : ''}`);
  });
  return h('label', { class: 'picker' }, 'Session ', select);
}

/** Draws the agreement page (`?session=ID` narrows it; the picker chooses it). */
export async function agreementPage() {
  const session = new URLSearchParams(location.search).get('session');
  const q = session ? `?session=${encodeURIComponent(session)}` : '';
  const [report, progress, labeled, codebook] = await Promise.all([
    api.get(`/api/labels/agreement${q}`),
    api.get(`/api/labels/progress${q || '?all=true'}`),
    api.get('/api/labels/progress'),
    api.cached('/api/codebook'),
  ]);
  const name = (id) => labelName(codebook, id);
  const o = report.overall;
  page(
    h('h1', { text: session ? `Agreement in ${session}` : 'Agreement' }),
    sessionPicker(labeled, session),
    h('p', { text: `${report.units} units, ${report.annotators.length} annotators, ${report.codings} submitted sets.` }),
    h('h2', { text: 'Overall' }),
    table(['Krippendorff α', 'Fleiss κ', 'Units', 'Annotators', 'Decisions'],
      [[figure(o.krippendorff_alpha, 3), figure(o.fleiss_kappa, 3), o.units, o.annotators, o.decisions]]),
    h('h2', { text: 'Per label' }),
    barChart(report.labels.map((l) => ({ name: name(l.label), value: l.krippendorff_alpha, note: `(${l.units} units)` })),
      { title: "Krippendorff's alpha per label" }),
    table(['Label', 'Krippendorff α', 'Fleiss κ', 'Units', 'Annotators', 'Present'],
      report.labels.map((l) => [name(l.label), figure(l.krippendorff_alpha, 3), figure(l.fleiss_kappa, 3), l.units, l.annotators, l.present])),
    h('h2', { text: "Cohen's κ per pair" }),
    pairs(report),
    h('h2', { text: 'Per annotator' }),
    annotators(progress),
  );
}

/** The largest team drawn as a matrix of pairs; larger ones get a list a page at a time. */
const MATRIX_ANNOTATORS = 20;

function pairs(report) {
  const names = report.annotators;
  if (names.length < 2) return h('p', { class: 'hint', text: 'Fewer than two annotators.' });
  if (names.length > MATRIX_ANNOTATORS || report.pairs_next) return pairList(report);
  const byPair = new Map(report.pairs.map((p) => [p.annotators.join('\n'), p]));
  const kappa = (a, b) => {
    const p = byPair.get(`${a}\n${b}`) || byPair.get(`${b}\n${a}`);
    return p ? `${figure(p.cohen_kappa, 3)} (${p.units})` : '';
  };
  return table(['', ...names], names.map((a) => [a, ...names.map((b) => (a === b ? '—' : kappa(a, b)))]));
}

/** The pairs that share units as rows, with a button for the next page while there is one. */
function pairList(report) {
  const rows = (list) => list.map((p) => h('tr', {},
    [p.annotators[0], p.annotators[1], figure(p.cohen_kappa, 3), p.units].map((c) => h('td', { text: String(c) }))));
  const body = h('tbody', {}, rows(report.pairs));
  const more = h('button', { type: 'button', text: 'More pairs' });
  let next = report.pairs_next;
  more.hidden = !next;
  more.addEventListener('click', async () => {
    const q = new URLSearchParams(location.search);
    const params = new URLSearchParams({ pairs_after: next });
    if (q.get('session')) params.set('session', q.get('session'));
    more.disabled = true;
    const page = await api.get(`/api/labels/agreement?${params}`);
    body.append(...rows(page.pairs));
    next = page.pairs_next;
    more.hidden = !next;
    more.disabled = false;
  });
  return h('div', {},
    h('p', { class: 'hint', text: 'Pairs of annotators who coded units in common, by name.' }),
    h('table', { class: 'grid' },
      h('thead', {}, h('tr', {}, ['Annotator', 'Annotator', "Cohen's κ", 'Units'].map((t) => h('th', { scope: 'col', text: t })))),
      body),
    more);
}

function annotators(progress) {
  const by = new Map();
  for (const s of progress.sessions) {
    for (const a of s.annotators) {
      const t = by.get(a.annotator) || { units: 0, leads: [], agree: [] };
      t.units += a.units.labeled;
      if (typeof a.median_lead_time === 'number') t.leads.push(a.median_lead_time);
      if (typeof a.agreement_with_adjudicated === 'number') t.agree.push(a.agreement_with_adjudicated);
      by.set(a.annotator, t);
    }
  }
  const median = (xs) => (xs.length ? [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)] : null);
  const mean = (xs) => (xs.length ? xs.reduce((s, v) => s + v, 0) / xs.length : null);
  return table(['Annotator', 'Units labeled', 'Median lead time (s)', 'Agreement with adjudicated'],
    [...by.entries()].map(([name, t]) => [name, t.units, figure(median(t.leads), 1), figure(mean(t.agree), 3)]));
}
