// What the label page does: writes with If-Match, or If-None-Match: * for the first (and
// the 412 choice), moving between units, the queue, quoting the selection.

import * as api from './api.js';
import { profileOf } from './auth.js';
import { labelName } from './codebook.js';
import { h, replace, status } from './dom.js';
import { dropDraft, saveDraft } from './drafts.js';
import { toggleGuidelines } from './help.js';
import { fromRecords, toRecords } from './labelstate.js';
import { navigate, unitUrl } from './nav.js';

/**
 * Writes the set with `status`; true when stored. Errors are shown in place. The write is
 * conditional: on the version the page holds (`If-Match`), or, when the page holds none,
 * on there being none (`If-None-Match: *`), so that a set written meanwhile elsewhere (in
 * another tab, by an import) is never silently replaced: the 412 shows both. `force`
 * drops the condition (the person chose to overwrite).
 */
export async function write(ctx, setStatus, { force = false } = {}) {
  const body = {
    annotator: ctx.who,
    status: setStatus,
    labels: setStatus === 'discarded' ? [] : toRecords(ctx.set, ctx.codebook),
    lead_time: Math.min(604800, Math.round((performance.now() - ctx.started) / 10) / 100),
  };
  const precondition = ctx.stored ? { ifMatch: `"labels-${ctx.stored.version}"` } : { ifNoneMatch: '*' };
  try {
    const { json } = await api.call(api.setPath(ctx.sessionId, ctx.unit.event_id), {
      method: 'PUT', body, ...(force ? {} : precondition),
    });
    stored(ctx, json);
    status(`Saved as ${setStatus} (version ${json.version}).`, 'ok');
    return true;
  } catch (err) {
    failed(ctx, err, setStatus);
    return false;
  }
}

function stored(ctx, set) {
  const held = reservation();
  if (held && held.session_id === ctx.sessionId && held.event_id === set.event_id) {
    sessionStorage.removeItem('sg.reservation');
  }
  ctx.stored = set;
  ctx.sets.mine.set(set.event_id, set);
  ctx.errors = {};
  dropDraft(ctx.who, ctx.sessionId, ctx.unit.event_id);
  ctx.render();
}

function failed(ctx, err, setStatus) {
  if (!(err instanceof api.ApiError)) {
    status(`Could not reach the server: ${err.message}. Your work is kept in this browser.`, 'error');
    return;
  }
  if (err.status === 412) {
    conflict(ctx, err.details.current || null, setStatus);
    return;
  }
  const field = String(err.details.field || '');
  const m = /^labels\[(\d+)\]/.exec(field);
  if (m) {
    const record = toRecords(ctx.set, ctx.codebook)[Number(m[1])];
    if (record) ctx.errors = { [record.id]: err.message };
    ctx.render();
  }
  status(`Not saved (${err.status}): ${err.message}`, 'error');
}

/**
 * The race lost (If-Match, or If-None-Match on a first write): both versions side by
 * side, labels by their codebook names, in full; the person chooses.
 */
function conflict(ctx, current, setStatus) {
  const list = (records) => h('ul', {}, (records || []).map((r) => h('li', {
    title: r.id, text: `${labelName(ctx.codebook, r.id)}${r.evidence ? ` “${r.evidence.quote}”` : ''}`,
  })));
  const box = h('section', { class: 'conflict', role: 'alert', 'aria-label': 'Conflicting versions' },
    h('h2', { text: 'Someone saved this set first' }),
    h('p', { text: current
      ? `The server has version ${current.version} (${current.status}, ${current.updated_at}). Choose which to keep.`
      : 'The set was removed on the server meanwhile. Choose what to do.' }),
    h('div', { class: 'versions' },
      h('div', {}, h('h3', { text: 'On the server' }), list(current && current.labels)),
      h('div', {}, h('h3', { text: 'Yours' }), list(toRecords(ctx.set, ctx.codebook)))),
    h('button', { type: 'button', text: 'Keep mine (overwrite)', on: { click: () => { ctx.stored = current; write(ctx, setStatus, { force: !current }); } } }),
    h('button', { type: 'button', text: "Take the server's", on: { click: () => takeServers(ctx, current) } }));
  replace(document.getElementById('conflict'), box);
  status('Not saved: the set changed on the server (412). Your version is kept.', 'error');
  box.querySelector('button').focus();
}

function takeServers(ctx, current) {
  ctx.stored = current;
  ctx.set = fromRecords(current ? current.labels : []);
  if (current) ctx.sets.mine.set(current.event_id, current);
  else ctx.sets.mine.delete(ctx.unit.event_id);
  dropDraft(ctx.who, ctx.sessionId, ctx.unit.event_id);
  ctx.render();
}

/** Moves `delta` units on in the session. */
export function go(ctx, delta) {
  const unit = ctx.units[ctx.index + delta];
  if (unit) {
    release(ctx.who);
    navigate(unitUrl(ctx.sessionId, unit.event_id));
  }
  else status(delta > 0 ? 'This is the last unit.' : 'This is the first unit.');
}

/** True unless the annotator chose to take units from every session (the default is the one they are in). */
function thisSessionOnly() {
  return sessionStorage.getItem('sg.queue.session') !== '0';
}

/**
 * Asks the queue for the next unit for this annotator, and opens it: inside a round, the
 * round's; else the session's they are in, unless they unticked "this session only".
 */
export async function queueNext(ctx) {
  const only = thisSessionOnly();
  const round = api.activeRound();
  sessionStorage.setItem('sg.queue', '1');
  try {
    const body = round
      ? { annotator: ctx.who, round: round.id }
      : { annotator: ctx.who, session: only ? ctx.sessionId : undefined };
    const { json } = await api.call('/api/labels/queue/next', { method: 'POST', body });
    if (json.done) {
      status(round ? `The round ${round.name} has no unit left for you.` : 'The queue has no unit left for you.', 'ok');
      return;
    }
    const r = json.reservation;
    release(ctx.who, r);
    sessionStorage.setItem('sg.reservation', JSON.stringify({ session_id: r.session_id, event_id: r.event_id }));
    navigate(unitUrl(r.session_id, r.event_id));
    status(`Reserved for you; ${r.remaining} unit(s) left in the queue.`);
  } catch (err) {
    status(`The queue refused (${err.status || 'network'}): ${err.message}`, 'error');
  }
}

function reservation() {
  try {
    return JSON.parse(sessionStorage.getItem('sg.reservation'));
  } catch {
    return null;
  }
}

/**
 * Gives back the unit the queue reserved for `who` and that they leave without a write
 * (unless it is `keep`), so that someone else may take it now rather than at its expiry.
 */
function release(who, keep = null) {
  const held = reservation();
  if (!held || (keep && keep.session_id === held.session_id && keep.event_id === held.event_id)) return;
  sessionStorage.removeItem('sg.reservation');
  api.call(`/api/labels/queue/release${api.codebookQuery()}`, { method: 'POST', body: { annotator: who, ...held } }).catch(() => {});
}

/** Queue mode's controls: next unit for me, this session only, and the server's overlap. */
export function queueControls(ctx) {
  const round = api.activeRound();
  if (round) return roundControls(ctx, round);
  const overlap = profileOf().queue_overlap;
  const only = h('input', {
    type: 'checkbox', id: 'queue-session-only', checked: thisSessionOnly(), 'aria-label': 'This session only',
    on: { change: () => sessionStorage.setItem('sg.queue.session', only.checked ? '1' : '0') },
  });
  return h('div', { class: 'queue', role: 'group', 'aria-label': 'Queue' },
    h('button', { type: 'button', text: 'Next unit for me (n)', on: { click: () => queueNext(ctx) } }),
    h('label', {}, only, ' this session only'),
    overlap ? h('span', { class: 'overlap', title: 'Set by the server (--queue-overlap)', text: ` each unit to ${overlap} annotator${overlap === 1 ? '' : 's'}` }) : null);
}

/** The label page's controls inside a round: its name, guidelines, queue, and a way out. */
function roundControls(ctx, round) {
  const leave = () => {
    api.setActiveRound(null);
    sessionStorage.removeItem('sg.queue');
    navigate(unitUrl(ctx.sessionId, ctx.unit.event_id), { replace: true });
  };
  return h('div', { class: 'round-bar', role: 'group', 'aria-label': 'Round' },
    h('strong', { text: `Round: ${round.name}` }),
    h('span', { class: 'hint', text: `codebook ${round.codebook}` }),
    h('button', { type: 'button', text: 'Next unit of the round (n)', on: { click: () => queueNext(ctx) } }),
    h('button', { type: 'button', text: 'Guidelines (g)', on: { click: () => toggleGuidelines() } }),
    h('button', { type: 'button', id: 'leave-round', text: 'Leave the round', on: { click: leave } }));
}

/** Sets the focused label's quote from the text selected in the current unit. */
export function quoteSelection(ctx) {
  const selection = window.getSelection();
  const text = selection ? selection.toString().trim() : '';
  const current = document.getElementById('current');
  if (!text || !current || !selection.anchorNode || !current.contains(selection.anchorNode)) {
    status('Select text in the unit first, then press e.', 'error');
    return;
  }
  const label = ctx.set.focused && ctx.set.labels.get(ctx.set.focused);
  if (!label) {
    status('Choose a label first: the quote goes to the focused label.', 'error');
    return;
  }
  label.quote = text.slice(0, 2000);
  delete ctx.errors[ctx.set.focused];
  ctx.render();
  status(`Quote set on ${labelName(ctx.codebook, ctx.set.focused)}.`, 'ok');
  saveDraft(ctx.who, ctx.sessionId, ctx.unit.event_id, ctx.set);
}
