// The codebook side panel: labels by family with their number keys, a filter box,
// definitions on hover or `?`, and the chosen labels' confidence, fields and quote.

import { h, replace } from './dom.js';
import { fieldValue } from './labelstate.js';

/**
 * The name of label `id` in `codebook` (the id itself for a label the codebook no longer
 * has: a set written under an older version keeps its ids).
 */
export function labelName(codebook, id) {
  const label = codebook && codebook.labels.find((l) => l.id === id);
  return label ? label.name : id;
}

/**
 * The panel for `codebook` over `set`. `actions`: toggle(id), focus(id), quote(),
 * changed() (a value was edited). `errors`: {labelId: message} shown in place.
 */
export function codebookPanel(codebook, set, actions, errors = {}) {
  const list = h('div', { class: 'families' });
  const info = h('div', { class: 'label-info', 'aria-live': 'polite' });
  const filter = h('input', {
    type: 'search',
    id: 'label-filter',
    class: 'filter',
    placeholder: 'Filter labels (f), Enter toggles the first',
    'aria-label': 'Filter labels',
  });
  const draw = () => replace(list, families(codebook, set, filter.value, actions, info));
  filter.addEventListener('input', draw);
  filter.addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && !e.ctrlKey) {
      const first = list.querySelector('button.label');
      if (first) actions.toggle(first.dataset.id);
      e.preventDefault();
    } else if (e.key === 'Escape') {
      filter.value = '';
      filter.blur();
      draw();
    }
  });
  draw();
  return h('aside', { class: 'codebook', 'aria-label': 'Codebook' },
    h('h2', { text: 'Codebook' }), filter, list, info,
    h('h2', { text: 'Chosen' }), chosen(codebook, set, actions, errors));
}

function families(codebook, set, query, actions, info) {
  const q = query.trim().toLowerCase();
  const byId = new Map(codebook.labels.map((l, i) => [l.id, [l, i]]));
  return codebook.families.map((family) => {
    const rows = family.labels
      .map((id) => byId.get(id))
      .filter(Boolean)
      .filter(([l]) => !q || `${l.id} ${l.name} ${l.family}`.toLowerCase().includes(q))
      .map(([l, i]) => labelRow(l, i, set, actions, info));
    if (!rows.length) return null;
    return h('section', { class: 'family' }, h('h3', { text: family.id }), h('ul', {}, rows));
  });
}

function labelRow(label, index, set, actions, info) {
  const on = set.labels.has(label.id);
  const key = index < 9 ? String(index + 1) : '';
  return h('li', {},
    h('button', {
      type: 'button',
      class: `label${on ? ' on' : ''}${set.focused === label.id ? ' focused' : ''}`,
      'aria-pressed': on ? 'true' : 'false',
      'aria-label': `${label.name} (${label.id})${key ? `, key ${key}` : ''}`,
      title: label.definition,
      dataset: { id: label.id },
      on: { click: () => actions.toggle(label.id) },
    }, h('kbd', { text: key || '·' }), ' ', label.name),
    h('button', {
      type: 'button',
      class: 'info',
      text: '?',
      'aria-label': `About ${label.name}`,
      on: { click: () => replace(info, describe(label)), mouseenter: () => replace(info, describe(label)) },
    }));
}

/** A label's definition, rules and cues. */
export function describe(label) {
  const list = (title, items) => (items && items.length
    ? [h('h4', { text: title }), h('ul', {}, items.map((t) => h('li', { text: t })))]
    : null);
  return h('div', { class: 'describe' },
    h('h3', { text: `${label.name} (${label.id})` }),
    h('p', { text: label.definition }),
    list('Include when', label.include_when),
    list('Exclude when', label.exclude_when),
    list('Cues', label.cues),
    list('Examples', label.examples && label.examples.positive),
    list('Not examples', label.examples && label.examples.negative));
}

function chosen(codebook, set, actions, errors) {
  if (!set.labels.size) return h('p', { class: 'hint', text: 'No label chosen: press 1–9 or filter.' });
  return codebook.labels
    .filter((l) => set.labels.has(l.id))
    .map((l) => chosenCard(l, set.labels.get(l.id), set.focused === l.id, actions, errors[l.id]));
}

function chosenCard(label, value, focused, actions, error) {
  const shown = h('output', { text: value.confidence.toFixed(2) });
  const slider = h('input', {
    type: 'range', min: 0, max: 1, step: 0.05, value: value.confidence,
    'aria-label': `Confidence of ${label.name}`,
    on: {
      input: () => {
        value.confidence = Number(slider.value);
        shown.textContent = value.confidence.toFixed(2);
        actions.changed();
      },
    },
  });
  return h('div', {
    class: `chosen${focused ? ' focused' : ''}`,
    dataset: { id: label.id },
    on: { focusin: () => { if (!focused) actions.focus(label.id); } },
  },
  h('div', { class: 'chosen-head' },
    h('strong', { text: label.name }),
    h('button', { type: 'button', class: 'link', text: 'Remove', 'aria-label': `Remove ${label.name}`, on: { click: () => actions.toggle(label.id) } })),
  h('label', { class: 'confidence' }, 'Confidence ', slider, ' ', shown),
  label.output_fields.map((f) => fieldInput(label, f, value, actions)),
  h('div', { class: 'quote' },
    value.quote ? h('q', { text: value.quote }) : h('span', { class: 'hint', text: 'No evidence quote.' }),
    h('button', { type: 'button', text: 'Quote selection (e)', 'aria-label': `Quote the selected text as evidence for ${label.name}`, on: { click: () => { actions.focus(label.id, false); actions.quote(); } } }),
    value.quote ? h('button', { type: 'button', class: 'link', text: 'Clear quote', on: { click: () => { value.quote = ''; actions.changed(true); } } }) : null),
  error ? h('p', { class: 'error', role: 'alert', text: error }) : null);
}

function fieldInput(label, field, value, actions) {
  const name = `${field.name}${field.required ? ' (required)' : ''}`;
  const current = value.fields[field.name];
  const set = (raw) => {
    value.fields[field.name] = fieldValue(field.type, raw);
    actions.changed();
  };
  let input;
  if (field.enum && field.enum.length) {
    input = h('select', { on: { change: () => set(input.value) } },
      h('option', { value: '', text: '—' }),
      field.enum.map((v) => h('option', { value: v, text: v, selected: current === v })));
  } else if (field.type === 'boolean') {
    input = h('input', { type: 'checkbox', checked: current === true, on: { change: () => set(input.checked) } });
  } else {
    const numeric = field.type === 'number' || field.type === 'integer';
    input = h('input', {
      type: numeric ? 'number' : 'text',
      step: field.type === 'integer' ? 1 : 'any',
      value: Array.isArray(current) ? current.join(', ') : (current ?? ''),
      placeholder: field.type === 'list[string]' ? 'comma, separated' : field.type,
      on: { input: () => set(input.value) },
    });
  }
  input.setAttribute('aria-label', `${label.name}: ${field.name}`);
  return h('label', { class: 'field', title: field.description || '' }, h('span', { text: name }), input);
}
