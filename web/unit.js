// One unit, rendered readably: user prompt, assistant text, reasoning (collapsible), tool
// calls with their input and outcome, system notices. Every string is text, never markup.

import { h } from './dom.js';

const FOLD_CHARS = 1500;

/**
 * The unit `unit` as an element; `quotes` are highlighted; `dim` marks a context unit.
 * `units`: the session's units in order, from which a Claude Code or pi unit's receiver
 * follows (see `parties`).
 */
export function renderUnit(unit, { quotes = [], dim = false, units = [] } = {}) {
  const ref = unit.text_or_artifact_ref || {};
  const kind = unit.unit_type || 'unit';
  return h('article', {
    class: `unit ${kind}${dim ? ' dim' : ''}`,
    'aria-label': `${title(unit)} ${unit.event_id}`,
    dataset: { eventId: unit.event_id },
  },
  unitHead(unit, units),
  ref.thinking ? reasoning(ref.thinking, dim) : null,
  ref.text ? block(ref.text, quotes, 'text', dim) : null,
  (ref.tool_calls || []).map((call) => toolCall(call, outcome(unit, call.tool_use_id))));
}

/**
 * Who speaks in `unit` and to whom: `{actor, receiver}` (receiver null when nobody is
 * addressed). AutoGen units name both. A Claude Code or pi unit names its actor only, and
 * its receiver follows from its lane: the main assistant and the human answer each other;
 * a sub-agent's prompt goes to that sub-agent (the agent of its log's turns), and the
 * sub-agent's turns go back to whoever delegated the task (its prompt's actor).
 */
export function parties(unit, units = []) {
  const actor = unit.actor_id || unit.actor_type || 'unknown';
  if ('receiver' in unit || unit.message_type) return { actor, receiver: unit.receiver || null };
  const source = unit.source || {};
  if (unit.unit_type === 'system_turn') return { actor, receiver: null };
  if (!source.is_sidechain) return { actor, receiver: unit.unit_type === 'user_turn' ? 'assistant' : 'human' };
  const lane = units.filter((u) => u.source && u.source.raw_file === source.raw_file);
  const other = unit.unit_type === 'user_turn'
    ? lane.find((u) => u.agent_kind === 'sub')
    : lane.find((u) => u.unit_type === 'user_turn');
  return { actor, receiver: other ? other.actor_id : null };
}

/** A unit's head: its role, who speaks to whom, the kind of speaker, its id. */
function unitHead(unit, units) {
  const { actor, receiver } = parties(unit, units);
  const kinds = { sub: 'sub-agent', main: 'main agent' };
  const kind = kinds[unit.agent_kind] || unit.actor_type;
  return h('header', { class: 'unit-head' },
    h('span', { class: 'who', text: title(unit) }),
    h('span', { class: 'parties', title: 'Who speaks, and to whom' },
      h('span', { class: 'actor', text: actor }),
      receiver ? [' → ', h('span', { class: 'receiver', text: receiver })] : null),
    kind ? h('span', { class: 'badge kind', text: kind }) : null,
    unit.message_type ? h('span', { class: 'badge', text: unit.message_type }) : null,
    unit.system_subtype ? h('span', { class: 'badge', text: unit.system_subtype }) : null,
    h('code', { class: 'event-id', text: unit.event_id }));
}

/** The unit's role: a prompt (a human's or an agent's), a turn, a notice, an AutoGen message. */
function title(unit) {
  if (unit.message_type) return unit.actor_type === 'human' ? 'Human message' : 'Agent message';
  if (unit.unit_type === 'user_turn') return unit.actor_type === 'agent' ? 'Agent prompt' : 'User';
  if (unit.unit_type === 'assistant_turn') return 'Assistant';
  if (unit.unit_type === 'system_turn') return 'System notice';
  return unit.unit_type || 'Unit';
}

function reasoning(text, dim) {
  return h('details', { class: 'reasoning', open: !dim },
    h('summary', { text: `Reasoning (${text.length} characters)` }),
    h('pre', { class: 'prose', text }));
}

/** A text block, the quotes marked, folded when long. */
function block(text, quotes, cls, dim) {
  const pre = h('pre', { class: `prose ${cls}` }, marked(text, quotes));
  if (text.length <= FOLD_CHARS || dim) {
    if (dim && text.length > 400) pre.classList.add('folded');
    return pre;
  }
  pre.classList.add('folded');
  const toggle = h('button', {
    type: 'button',
    class: 'link fold',
    text: `Show all ${text.length} characters`,
    on: {
      click: () => {
        const folded = pre.classList.toggle('folded');
        toggle.textContent = folded ? `Show all ${text.length} characters` : 'Fold';
      },
    },
  });
  return h('div', { class: 'foldable' }, pre, toggle);
}

/** `text` as text nodes, each occurrence of a quote inside a <mark>. */
export function marked(text, quotes) {
  const wanted = quotes.filter((q) => q && text.includes(q));
  if (!wanted.length) return [text];
  const spans = [];
  for (const q of wanted) {
    let at = text.indexOf(q);
    while (at >= 0) {
      spans.push([at, at + q.length]);
      at = text.indexOf(q, at + q.length);
    }
  }
  spans.sort((a, b) => a[0] - b[0]);
  const out = [];
  let pos = 0;
  for (const [start, end] of spans) {
    if (start < pos) continue;
    out.push(text.slice(pos, start), h('mark', { text: text.slice(start, end) }));
    pos = end;
  }
  out.push(text.slice(pos));
  return out;
}

function outcome(unit, toolUseId) {
  const calls = (unit.tool_summary && unit.tool_summary.tool_calls) || [];
  return calls.find((c) => c.tool_use_id === toolUseId) || null;
}

function toolCall(call, result) {
  const input = call.input === undefined ? '' : JSON.stringify(call.input, null, 2);
  const long = input.split('\n').length > 12 || input.length > FOLD_CHARS;
  let verdict = 'no result logged';
  let cls = 'unknown';
  if (result) {
    verdict = result.success && !result.is_error ? 'succeeded' : 'failed';
    cls = verdict === 'succeeded' ? 'ok' : 'failed';
    verdict += ` · ${result.result_count} result${result.result_count === 1 ? '' : 's'}`;
  }
  return h('details', { class: `tool ${cls}`, open: !long },
    h('summary', {},
      h('span', { class: 'tool-name', text: call.tool_name }),
      h('span', { class: `outcome ${cls}`, text: verdict })),
    h('pre', { class: 'code', text: input }));
}
