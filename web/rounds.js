// The rounds pages: every round with its progress per annotator and a form that creates
// one from a search (a live count and a preview of the sample as the form changes); a
// round's labeling (its queue, codebook and guidelines); its agreement, humans and models.

import * as api from './api.js';
import { annotator, profileOf } from './auth.js';
import { labelName } from './codebook.js';
import { figure, h, page, replace, status } from './dom.js';
import { navigate, unitUrl } from './nav.js';
import { bar } from './sessions.js';

/** Draws the rounds page. */
export async function roundsPage() {
  const [{ rounds }, books] = await Promise.all([api.get('/api/rounds'), api.get('/api/codebooks')]);
  page(
    h('h1', { text: 'Rounds' }),
    rounds.length ? roundTable(rounds) : h('p', { text: 'No round yet.' }),
    h('h2', { text: 'New round' }),
    createForm(books),
  );
}

function roundTable(rounds) {
  const rows = rounds.map((r) => {
    const id = encodeURIComponent(r.id);
    const people = Object.entries(r.progress.annotators).map(([who, n]) => h('div', { class: 'who-progress' },
      h('span', { class: 'name', text: who }),
      bar(n.submitted, r.units, `${who}: ${n.submitted} of ${r.units} submitted`),
      h('span', { text: `${n.submitted} / ${r.units}` })));
    return h('tr', {},
      h('th', { scope: 'row', text: r.name }),
      h('td', { text: r.codebook }),
      h('td', { text: String(r.units) }),
      h('td', {}, bar(r.progress.complete, r.units, `${r.progress.complete} of ${r.units} units complete`), ` ${r.progress.complete} / ${r.units}`),
      h('td', {}, people.length ? people : h('span', { class: 'hint', text: 'nobody yet' })),
      h('td', { text: r.status }),
      h('td', {},
        h('a', { href: `/rounds/${id}/label`, text: 'Label' }), ' · ',
        h('a', { href: `/rounds/${id}/review`, text: 'Review' }), ' · ',
        h('a', { href: `/rounds/${id}/agreement`, text: 'Agreement' })));
  });
  return h('table', { class: 'grid', id: 'rounds' },
    h('thead', {}, h('tr', {}, ['Round', 'Codebook', 'Units', 'Complete', 'Per annotator', 'Status', ''].map((t) => h('th', { scope: 'col', text: t })))),
    h('tbody', {}, rows));
}

/** The form's inputs, by name. */
function inputs(books) {
  const text = (name, value = '', attrs = {}) => h('input', { type: 'text', name, id: `round-${name}`, value, ...attrs });
  const number = (name, value) => h('input', { type: 'number', name, id: `round-${name}`, min: 1, value });
  const check = (name, checked) => h('input', { type: 'checkbox', name, id: `round-${name}`, checked });
  const codebook = h('select', { name: 'codebook', id: 'round-codebook' },
    books.codebooks.map((b) => h('option', { value: b.id, text: `${b.id} (${b.labels} labels)`, selected: b.default })));
  const unitType = h('select', { name: 'unit_type', id: 'round-unit_type' },
    [['', 'any unit the codebook codes'], ['user_turn', 'user turns'], ['assistant_turn', 'assistant turns']]
      .map(([value, label]) => h('option', { value, text: label })));
  return {
    name: text('name', 'New round'), codebook, query: text('query', '', { placeholder: 'words to search (empty: every unit)' }),
    unit_type: unitType, failed: check('failed', false), delegation: check('delegation', false),
    size: number('size', 100), seed: number('seed', 1), by_session: check('by_session', true),
    by_type: check('by_type', false), max_per_session: h('input', { type: 'number', name: 'max_per_session', id: 'round-max_per_session', min: 1 }),
    overlap: number('overlap', profileOf().queue_overlap || 2), annotators: text('annotators', '', { placeholder: 'names, comma-separated (empty: anyone)' }),
    guidelines: h('textarea', { name: 'guidelines', id: 'round-guidelines', placeholder: 'What annotators read first (Markdown, shown as text)' }),
  };
}

/** The round the form describes, as `POST /api/rounds` takes it. */
function definition(f) {
  const filters = {};
  if (f.unit_type.value) filters.unit_type = f.unit_type.value;
  if (f.failed.checked) filters.failed = true;
  if (f.delegation.checked) filters.delegation = true;
  const annotators = f.annotators.value.split(',').map((a) => a.trim()).filter(Boolean);
  return {
    name: f.name.value.trim(), codebook: f.codebook.value, guidelines: f.guidelines.value,
    selection: { query: f.query.value.trim(), filters },
    sample: {
      size: Number(f.size.value) || null, seed: Number(f.seed.value) || 0,
      stratify: { session: f.by_session.checked, unit_type: f.by_type.checked },
      max_per_session: Number(f.max_per_session.value) || null,
    },
    overlap: Number(f.overlap.value) || null,
    annotators: annotators.length ? annotators : null,
  };
}

function createForm(books) {
  const f = inputs(books);
  const count = h('p', { id: 'round-count', 'aria-live': 'polite', text: 'Counting…' });
  const preview = h('ol', { id: 'round-preview', class: 'preview' });
  let timer = null;
  const refresh = () => {
    clearTimeout(timer);
    timer = setTimeout(() => previewRound(definition(f), count, preview), 250);
  };
  const row = (label, input) => [h('label', { for: input.id, text: label }), input];
  const form = h('form', { class: 'round-form', id: 'round-form', on: { input: refresh, change: refresh } },
    row('Name', f.name), row('Codebook', f.codebook), row('Search', f.query), row('Unit type', f.unit_type),
    row('Only failed tool calls', f.failed), row('Only delegation', f.delegation),
    row('Sample size', f.size), row('Seed', f.seed), row('Stratify by session', f.by_session),
    row('Stratify by unit type', f.by_type), row('At most per session', f.max_per_session),
    row('Annotators per unit', f.overlap), row('Annotators', f.annotators), row('Guidelines', f.guidelines),
    h('span'), h('button', { type: 'submit', id: 'round-create', text: 'Create the round' }));
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    createRound(definition(f));
  });
  refresh();
  return h('div', {}, form, count, preview);
}

async function previewRound(body, count, preview) {
  try {
    const { json } = await api.call('/api/rounds?dry_run=true', { method: 'POST', body });
    count.textContent = `${json.candidates} unit(s) match; the sample holds ${json.units} from ${Object.keys(json.by_session).length} session(s).`;
    replace(preview, json.preview.map((u) => h('li', {},
      h('a', { href: unitUrl(u.session_id, u.event_id), text: `${u.unit_type} ${u.event_id}` }), ' ',
      h('span', { class: 'excerpt', text: u.text }))));
  } catch (err) {
    count.textContent = `No preview: ${err.message}`;
    replace(preview);
  }
}

async function createRound(body) {
  try {
    const { json } = await api.call('/api/rounds', { method: 'POST', body });
    status(`Round ${json.round.name} created with ${json.round.units} unit(s).`, 'ok');
    navigate('/rounds');
  } catch (err) {
    status(`The round was not created (${err.status || 'network'}): ${err.message}`, 'error');
  }
}

/** Enters round `id` in this tab and opens its next unit for the annotator. */
export async function roundLabel(id) {
  const round = await api.get(`/api/rounds/${encodeURIComponent(id)}`);
  api.setActiveRound(round);
  const who = annotator();
  const { json } = await api.call('/api/labels/queue/next', { method: 'POST', body: { annotator: who, round: round.id } });
  if (json.done) {
    page(h('h1', { text: round.name }), h('p', { id: 'round-done', text: `The round has no unit left for ${who}.` }),
      h('a', { href: '/rounds', text: 'Back to the rounds' }));
    return;
  }
  sessionStorage.setItem('sg.queue', '1');
  sessionStorage.setItem('sg.reservation', JSON.stringify({ session_id: json.reservation.session_id, event_id: json.reservation.event_id }));
  navigate(unitUrl(json.reservation.session_id, json.reservation.event_id), { replace: true });
}

/** Draws round `id`'s agreement: the humans', then each model as one more annotator. */
export async function roundAgreementPage(id) {
  const body = await api.get(`/api/rounds/${encodeURIComponent(id)}/agreement`);
  const codebook = await api.cached(`/api/codebook?codebook=${encodeURIComponent(body.codebook)}`);
  const report = body.report;
  const models = report.models.map((m) => h('tr', {},
    h('th', { scope: 'row', text: m.model }),
    h('td', { text: String(m.units) }),
    h('td', { text: figure(m.with_humans.overall.krippendorff_alpha) }),
    h('td', { text: figure(m.adjudicated.overall.krippendorff_alpha) }),
    h('td', { text: figure(m.micro.precision) }),
    h('td', { text: figure(m.micro.recall) }),
    h('td', { text: String(m.disagreements.length) })));
  page(
    h('h1', { text: `Agreement of round ${id}` }),
    h('p', { text: `${report.units} units under the codebook ${body.codebook}.` }),
    h('table', { class: 'grid', id: 'round-humans' }, h('tbody', {},
      h('tr', {}, h('th', { scope: 'row', text: 'Humans: Krippendorff α' }), h('td', { text: figure(report.humans.overall.krippendorff_alpha) })),
      h('tr', {}, h('th', { scope: 'row', text: 'Units coded by two or more' }), h('td', { text: String(report.humans.overall.units) })))),
    h('h2', { text: 'Models as one more annotator' }),
    report.models.length
      ? h('table', { class: 'grid', id: 'round-models' },
        h('thead', {}, h('tr', {}, ['Model', 'Units', 'α with the humans', 'α with the adjudicated', 'Precision', 'Recall', 'Disagreements'].map((t) => h('th', { scope: 'col', text: t })))),
        h('tbody', {}, models))
      : h('p', { text: 'No model has suggestions on this round.' }),
    disagreements(report.models, (ids) => ids.map((l) => labelName(codebook, l)).join(', ')),
  );
}

/**
 * Where each model departs from the adjudicated set or the humans' majority, with links;
 * `names` writes a list of label ids as their names.
 */
function disagreements(models, names) {
  const items = models.flatMap((m) => m.disagreements.slice(0, 50).map((d) => h('li', {},
    h('a', { href: unitUrl(d.session_id, d.event_id), text: d.event_id }),
    ` ${m.model}: suggested ${names(d.suggested) || 'nothing'}; ${d.reference === 'adjudicated' ? 'adjudicated' : 'the humans chose'} ${names(d.expected) || 'nothing'}`)));
  return items.length ? [h('h2', { text: 'Where the models and the humans disagree' }), h('ul', { id: 'round-disagreements' }, items)] : null;
}
