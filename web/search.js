// Search across every session: a box with filters, the units it finds ranked, each with
// its highlighted snippet (the matched words are marked from offsets, never from markup)
// and a link to label it.

import * as api from './api.js';
import { h, replace } from './dom.js';
import { unitUrl } from './nav.js';

const PAGE = 20;

/** The search box and its results, for the sessions page. */
export function searchBox() {
  const q = h('input', { type: 'search', id: 'search-q', 'aria-label': 'Search units', placeholder: 'Search every session' });
  const select = (id, label, options) => h('select', { id, 'aria-label': label },
    options.map(([value, text]) => h('option', { value, text })));
  const framework = select('search-framework', 'Framework', [['', 'any framework'], ['claudecode', 'Claude Code'], ['pi', 'pi'], ['autogen', 'AutoGen'], ['codex', 'Codex CLI'], ['gemini', 'Gemini CLI']]);
  const unitType = select('search-unit-type', 'Unit type', [['', 'any unit'], ['user_turn', 'user turns'], ['assistant_turn', 'assistant turns'], ['system_turn', 'system turns']]);
  const failed = h('input', { type: 'checkbox', id: 'search-failed' });
  const delegation = h('input', { type: 'checkbox', id: 'search-delegation' });
  const results = h('div', { id: 'search-results', 'aria-live': 'polite' });
  const run = (offset = 0) => {
    const params = new URLSearchParams({ q: q.value.trim(), limit: String(PAGE), offset: String(offset) });
    if (framework.value) params.set('framework', framework.value);
    if (unitType.value) params.set('unit_type', unitType.value);
    if (failed.checked) params.set('failed', 'true');
    if (delegation.checked) params.set('delegation', 'true');
    show(results, params, run);
  };
  const form = h('form', { class: 'search-form', role: 'search', on: { submit: (e) => { e.preventDefault(); run(); } } },
    q, framework, unitType,
    h('label', {}, failed, ' failed tool call'), h('label', {}, delegation, ' delegation'),
    h('button', { type: 'submit', text: 'Search' }));
  return h('section', { 'aria-label': 'Search' }, form, results);
}

async function show(results, params, run) {
  let body;
  try {
    body = await api.get(`/api/search?${params}`);
  } catch (err) {
    replace(results, h('p', { class: 'error', role: 'alert', text: `Search failed: ${err.message}` }));
    return;
  }
  const offset = body.offset;
  const more = offset + body.results.length < body.total;
  replace(results,
    h('p', { id: 'search-total', text: `${body.total} unit(s)${body.index.pending ? ' (the index is still catching up)' : ''}` }),
    h('ol', { class: 'hits', start: offset + 1 }, body.results.map(hit)),
    offset > 0 ? h('button', { type: 'button', text: 'Previous', on: { click: () => run(Math.max(0, offset - PAGE)) } }) : null,
    more ? h('button', { type: 'button', text: 'More', on: { click: () => run(offset + PAGE) } }) : null);
}

function hit(result) {
  return h('li', {},
    h('a', { href: unitUrl(result.session_id, result.event_id), text: `${result.unit_type} · ${result.actor_id}` }),
    result.failed_tool_call ? h('span', { class: 'hint', text: ' · failed tool call' }) : null,
    h('div', { class: 'hit-snippet' }, marked(result.snippet)));
}

/** The snippet's text with its matched words in <b>, built as text nodes. */
function marked(snippet) {
  const parts = [];
  let at = 0;
  for (const [start, end] of snippet.highlights) {
    if (start > at) parts.push(snippet.text.slice(at, start));
    parts.push(h('b', { text: snippet.text.slice(start, end) }));
    at = end;
  }
  parts.push(snippet.text.slice(at));
  return parts;
}
