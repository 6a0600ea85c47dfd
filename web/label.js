// The label page: one unit at a time, the previous and next dimmed, the codebook beside.
// A session's units come in one annotations body, fetched once: the next unit is already in
// memory, so moving on is a redraw without a request.

import * as api from './api.js';
import { annotator, profileOf } from './auth.js';
import { codebookPanel, labelName } from './codebook.js';
import { dock, h, page, status } from './dom.js';
import { loadDraft, saveDraft } from './drafts.js';
import { toggleGuidelines, toggleHelp } from './help.js';
import { emptySet, fromRecords, toggle } from './labelstate.js';
import { go, queueNext, quoteSelection, write, queueControls } from './labelactions.js';
import { navigate, onKeys, typing, unitUrl } from './nav.js';
import { renderUnit } from './unit.js';

let sessionSets = null;

/**
 * The sets of the session: mine by unit (`?annotator=` filters to them) and the others' the
 * API lets me see (the unfiltered listing; in blind mode the server hides them until I
 * submit).
 */
export function loadSets(sessionId, who, force = false) {
  const book = api.codebookQuery();
  if (force || !sessionSets || sessionSets.sessionId !== sessionId || sessionSets.who !== who || sessionSets.book !== book) {
    const promise = fetchSets(sessionId, who);
    sessionSets = { sessionId, who, book, promise };
    promise.catch(() => { sessionSets = null; });
  }
  return sessionSets.promise;
}

async function fetchSets(sessionId, who) {
  const [own, all] = await Promise.all([
    api.get(api.labelsPath(sessionId, who)),
    api.get(api.labelsPath(sessionId)),
  ]);
  const mine = new Map(own.labels.filter((s) => s.annotator === who).map((s) => [s.event_id, s]));
  const others = new Map();
  for (const set of all.labels.filter((s) => s.annotator !== who)) {
    others.set(set.event_id, [...(others.get(set.event_id) || []), set]);
  }
  return { mine, others };
}

/** Draws the label page on unit `eventId` of `sessionId` (the first unlabeled one if none). */
export async function labelPage(sessionId, eventId) {
  const who = annotator();
  const [codebook, units, sets] = await Promise.all([api.codebook(), api.codedUnits(sessionId), loadSets(sessionId, who)]);
  if (!units.length) {
    page(h('p', { text: 'This session has no units.' }));
    return;
  }
  if (!eventId) {
    const first = units.find((u) => !sets.mine.has(u.event_id)) || units[0];
    navigate(unitUrl(sessionId, first.event_id), { replace: true });
    return;
  }
  const index = units.findIndex((u) => u.event_id === eventId);
  if (index < 0) {
    page(h('p', { class: 'error', role: 'alert', text: `No unit ${eventId} in session ${sessionId}.` }));
    return;
  }
  const ctx = { sessionId, units, index, unit: units[index], codebook, who, sets, errors: {} };
  ctx.stored = sets.mine.get(eventId) || null;
  ctx.set = ctx.stored ? fromRecords(ctx.stored.labels) : emptySet();
  restoreDraft(ctx);
  ctx.started = performance.now();
  ctx.render = () => render(ctx);
  render(ctx);
  performance.measure('sg-unit-shown', 'sg-route');
  // A task queued from the next animation frame runs once that frame is painted.
  requestAnimationFrame(() => setTimeout(() => performance.measure('sg-unit-painted', 'sg-route')));
  onKeys((e) => keys(ctx, e));
}

function restoreDraft(ctx) {
  const draft = loadDraft(ctx.who, ctx.sessionId, ctx.unit.event_id);
  if (!draft) return;
  const storedAt = ctx.stored ? Date.parse(ctx.stored.updated_at) : 0;
  if (draft.at > storedAt) {
    ctx.set = draft.set;
    status('Restored your unsaved work on this unit.');
  }
}

/** Keeps the draft and redraws the panel (`all`: the unit too, for highlights). */
export function changed(ctx, all = false) {
  saveDraft(ctx.who, ctx.sessionId, ctx.unit.event_id, ctx.set);
  if (all) ctx.render();
}

function actions(ctx) {
  return {
    toggle: (id) => { toggle(ctx.set, id); changed(ctx); ctx.render(); },
    focus: (id, redraw = true) => { ctx.set.focused = id; if (redraw) ctx.render(); },
    quote: () => quoteSelection(ctx),
    changed: (all = false) => changed(ctx, all),
  };
}

function render(ctx) {
  const quotes = [...ctx.set.labels.values()].map((l) => l.quote).filter(Boolean);
  const prev = ctx.units[ctx.index - 1];
  const next = ctx.units[ctx.index + 1];
  const filter = document.getElementById('label-filter');
  const filterText = filter ? filter.value : '';
  const filtering = filter && document.activeElement === filter;
  page(
    h('div', { class: 'label-page' },
      h('section', { class: 'units', 'aria-label': 'Unit' },
        toolbar(ctx),
        h('div', { id: 'conflict' }),
        prev ? renderUnit(prev, { dim: true, units: ctx.units }) : null,
        h('div', { id: 'current', class: 'current' }, renderUnit(ctx.unit, { quotes, units: ctx.units })),
        next ? renderUnit(next, { dim: true, units: ctx.units }) : null,
        othersView(ctx)),
      h('div', { class: 'side' },
        codebookPanel(ctx.codebook, ctx.set, actions(ctx), ctx.errors))),
  );
  dock(buttons(ctx));
  const again = document.getElementById('label-filter');
  if (filterText && again) {
    again.value = filterText;
    again.dispatchEvent(new Event('input'));
  }
  if (filtering && again) again.focus();
}

function toolbar(ctx) {
  const mine = ctx.stored ? `your set: ${ctx.stored.status}, version ${ctx.stored.version}` : 'not labeled by you yet';
  return h('header', { class: 'toolbar' },
    h('h1', {}, 'Session ', h('a', { href: `/review/${encodeURIComponent(ctx.sessionId)}`, text: ctx.sessionId })),
    h('p', { class: 'where', text: `Unit ${ctx.index + 1} of ${ctx.units.length} · ${mine}` }),
    queueControls(ctx));
}

/**
 * The page's actions, docked at the bottom of the window above the status line (see
 * `dock`): always in view whatever the unit's length and the codebook panel's.
 */
function buttons(ctx) {
  const b = (text, key, label, fn) => h('button', { type: 'button', 'aria-label': label, on: { click: fn } },
    text, h('span', { class: 'key', text: ` (${key})` }));
  return h('div', { class: 'actions', id: 'label-actions', role: 'group', 'aria-label': 'Actions' },
    b('Submit & next', 'Ctrl+Enter', 'Submit and go to the next unit', () => submit(ctx)),
    b('Save draft', 'd', 'Save a draft', () => write(ctx, 'draft')),
    b('Skip', 's', 'Skip this unit', () => skip(ctx)),
    b('← Previous', 'k', 'Previous unit', () => go(ctx, -1)),
    b('Next →', 'j', 'Next unit', () => go(ctx, 1)),
    b('Shortcuts', '?', 'Show keyboard shortcuts', toggleHelp));
}

/**
 * Others' sets on the unit, by label name. The server decides what the annotator may
 * see: in blind mode it lists others' sets only once the annotator submitted theirs (the
 * page says so until then); otherwise they are shown at once.
 */
function othersView(ctx) {
  const others = ctx.sets.others.get(ctx.unit.event_id) || [];
  const submitted = ctx.stored && ['submitted', 'adjudicated'].includes(ctx.stored.status);
  if (profileOf().blind && !submitted) {
    return h('p', { class: 'hint', id: 'others-blind', text: "Blind mode: others' labels on this unit show once you submit yours." });
  }
  if (!others.length) return null;
  return h('section', { class: 'others', 'aria-label': "Others' labels" },
    h('h2', { text: "Others' labels" }),
    h('ul', {}, others.map((s) => h('li', {},
      h('strong', { text: `${s.annotator} (${s.status}): ` }),
      s.labels.map((l) => labelName(ctx.codebook, l.id)).join(', ') || 'none'))));
}

async function submit(ctx) {
  if (await write(ctx, 'submitted')) {
    if (sessionStorage.getItem('sg.queue') === '1' || api.activeRound()) await queueNext(ctx);
    else go(ctx, 1);
  }
}

async function skip(ctx) {
  ctx.set = emptySet();
  if (await write(ctx, 'discarded')) go(ctx, 1);
}

/** Moves the focused label's confidence by `delta` (keys - and +). */
function nudge(ctx, delta) {
  const label = ctx.set.focused && ctx.set.labels.get(ctx.set.focused);
  if (!label) return;
  label.confidence = Math.min(1, Math.max(0, Math.round((label.confidence + delta) * 20) / 20));
  changed(ctx, true);
}

const KEYS = {
  f: () => document.getElementById('label-filter')?.focus(),
  '/': () => document.getElementById('label-filter')?.focus(),
  e: (ctx) => quoteSelection(ctx),
  j: (ctx) => go(ctx, 1),
  k: (ctx) => go(ctx, -1),
  d: (ctx) => write(ctx, 'draft'),
  s: (ctx) => skip(ctx),
  n: (ctx) => queueNext(ctx),
  g: () => toggleGuidelines(),
  '-': (ctx) => nudge(ctx, -0.1),
  '+': (ctx) => nudge(ctx, 0.1),
  '=': (ctx) => nudge(ctx, 0.1),
  '?': () => toggleHelp(),
};

function keys(ctx, e) {
  if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) {
    e.preventDefault();
    submit(ctx);
    return;
  }
  if (typing(e)) {
    if (e.key === 'Escape') e.target.blur();
    return;
  }
  if (e.ctrlKey || e.metaKey || e.altKey) return;
  if (document.getElementById('help') && e.key !== '?') return;
  if (document.getElementById('guidelines') && e.key !== 'g') return;
  const n = Number(e.key);
  if (Number.isInteger(n) && n >= 1 && n <= 9) {
    const label = ctx.codebook.labels[n - 1];
    if (label) actions(ctx).toggle(label.id);
  } else if (Object.hasOwn(KEYS, e.key)) KEYS[e.key](ctx);
  else return;
  e.preventDefault();
}
