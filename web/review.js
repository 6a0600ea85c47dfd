// The review page: per unit, every annotator's labels side by side, disagreements marked,
// machine suggestions marked as such (and where they differ from the humans); the
// reviewer writes the adjudicated set. A session's units, or a round's.

import * as api from './api.js';
import { annotator, profileOf } from './auth.js';
import { labelName } from './codebook.js';
import { h, page, replace, status } from './dom.js';
import { onKeys, typing, unitUrl } from './nav.js';
import { parties } from './unit.js';

/**
 * Draws the review page of round `roundId`: its units, across its sessions, under its
 * codebook (the tab enters the round, so that adjudicated sets are written under it).
 */
export async function roundReviewPage(roundId) {
  const round = await api.get(`/api/rounds/${encodeURIComponent(roundId)}`);
  api.setActiveRound(round);
  const who = annotator();
  const [{ units: listed }, codebook] = await Promise.all([
    api.get(`/api/rounds/${encodeURIComponent(roundId)}/units`),
    api.codebook(),
  ]);
  const cards = [];
  for (const sessionId of [...new Set(listed.map((u) => u.session_id))]) {
    const wanted = new Set(listed.filter((u) => u.session_id === sessionId).map((u) => u.event_id));
    const [units, listing] = await Promise.all([api.units(sessionId), api.get(api.labelsPath(sessionId))]);
    const byUnit = groupSets(listing);
    for (const unit of units.filter((u) => wanted.has(u.event_id))) {
      const card = { sessionId, unit, units, codebook, who };
      cards.push(unitCard(card, byUnit.get(unit.event_id) || { sets: [], suggestions: [] }));
    }
  }
  reviewList(`Review of round ${round.name}`, `${cards.length} units under the codebook ${round.codebook}. Adjudicating as ${who}.`, cards);
}

/** The review page's list of `cards`, the filter to disagreements, and its keys. */
function reviewList(title, summary, cards) {
  const list = h('div', { class: 'review-list' });
  const only = h('input', { type: 'checkbox', id: 'only-disagreements' });
  const draw = () => replace(list, cards.filter((card) => !only.checked || card.classList.contains('disagree')));
  only.addEventListener('change', draw);
  draw();
  page(
    h('h1', { text: title }),
    h('p', { text: `${summary} Keys: j/k move between units, a approves the majority (and saves it), Enter saves the ticked labels.` }),
    profileOf().reviewer ? null : h('p', { class: 'error', text: `${annotator()} is not a reviewer: the server refuses adjudicated sets from them (403).` }),
    h('label', {}, only, ' Only units with disagreement'),
    list,
  );
  onKeys((e) => reviewKeys(e, list));
}

/** Draws the review page of `sessionId`. */
export async function reviewPage(sessionId) {
  const who = annotator();
  const [units, listing, codebook] = await Promise.all([
    api.codedUnits(sessionId),
    api.get(api.labelsPath(sessionId)),
    api.codebook(),
  ]);
  const byUnit = groupSets(listing);
  const reviewed = units.filter((u) => byUnit.has(u.event_id));
  const cards = reviewed.map((unit) => unitCard({ sessionId, unit, units, codebook, who }, byUnit.get(unit.event_id)));
  reviewList(`Review ${sessionId}`, `${reviewed.length} of ${units.length} units have labels. Adjudicating as ${who}.`, cards);
}

function groupSets(listing) {
  const byUnit = new Map();
  const entry = (id) => {
    if (!byUnit.has(id)) byUnit.set(id, { sets: [], suggestions: [] });
    return byUnit.get(id);
  };
  for (const s of listing.labels) entry(s.event_id).sets.push(s);
  for (const s of listing.suggestions || []) entry(s.event_id).suggestions.push(s);
  return byUnit;
}

/**
 * The card of one unit (`at`: {sessionId, unit, units, codebook, who}): every annotator's
 * labels by name, the models' apart, the adjudicated set to tick and save.
 */
function unitCard(at, { sets, suggestions }) {
  const { sessionId, unit, codebook, who } = at;
  const humans = sets.filter((s) => s.status === 'submitted');
  const adjudicated = sets.find((s) => s.status === 'adjudicated');
  const ids = [...new Set([...sets, ...suggestions].flatMap((s) => s.labels.map((l) => l.id)))].sort();
  const count = (id) => humans.filter((s) => s.labels.some((l) => l.id === id)).length;
  const majority = ids.filter((id) => count(id) * 2 > humans.length);
  const disagree = ids.some((id) => count(id) > 0 && count(id) < humans.length);
  const picked = new Set(adjudicated ? adjudicated.labels.map((l) => l.id) : majority);
  const differs = (s) => {
    const mine = new Set(s.labels.map((l) => l.id));
    return mine.size !== picked.size || [...mine].some((id) => !picked.has(id));
  };
  const modelDiffers = (adjudicated || humans.length > 0) && suggestions.some(differs);
  const name = (id) => labelName(codebook, id);
  const boxes = new Map(ids.map((id) => [id, h('input', { type: 'checkbox', checked: picked.has(id), 'aria-label': `Adjudicated: ${id}`, title: name(id) })]));
  const columns = [...humans.map((s) => [s.annotator, s]), ...suggestions.map((s) => [`model ${s.model}`, s])];
  const has = (set, id) => (set.labels.some((l) => l.id === id) ? '✓' : '');
  const text = (unit.text_or_artifact_ref && unit.text_or_artifact_ref.text) || '';
  const { actor, receiver } = parties(unit, at.units);
  // The reviewer's own set on the unit, whatever its status: the adjudicated set replaces it.
  const state = { mine: sets.find((s) => s.annotator === who) || null, saving: false };
  const save = (labels) => adjudicate({ sessionId, eventId: unit.event_id, who, codebook }, labels, state, card);
  const approve = () => {
    for (const [id, box] of boxes) box.checked = majority.includes(id);
    save(majority);
  };
  const card = h('section', { class: `review-unit${disagree ? ' disagree' : ''}`, tabindex: 0, 'aria-label': `Unit ${unit.event_id}` },
    h('h2', {}, h('a', { href: unitUrl(sessionId, unit.event_id), text: unit.event_id }),
      h('span', { class: 'parties', text: ` ${actor}${receiver ? ` → ${receiver}` : ''}` }),
      disagree ? h('span', { class: 'badge warn', text: 'disagreement' }) : null,
      modelDiffers ? h('span', { class: 'badge model', text: adjudicated ? 'model differs from the adjudicated set' : 'model differs from the majority' }) : null),
    h('p', { class: 'excerpt', text: text.length > 300 ? `${text.slice(0, 300)}…` : text }),
    h('table', { class: 'grid' },
      h('thead', {}, h('tr', {}, h('th', { text: 'Label' }), columns.map(([n]) => h('th', { scope: 'col', text: n })), h('th', { text: 'Adjudicated' }))),
      h('tbody', {}, ids.map((id) => h('tr', { class: count(id) > 0 && count(id) < humans.length ? 'split' : '' },
        h('th', { scope: 'row', title: id, text: name(id) }),
        columns.map(([, s]) => h('td', { text: has(s, id) })),
        h('td', {}, boxes.get(id)))))),
    h('div', { class: 'actions' },
      h('button', { type: 'button', class: 'approve', text: 'Approve majority (a)', on: { click: approve } }),
      h('button', { type: 'button', class: 'save', text: 'Save adjudicated (Enter)', on: { click: () => save(ids.filter((id) => boxes.get(id).checked)) } }),
      h('span', { class: 'result', role: 'status' })));
  return card;
}

/** True when `set` is adjudicated and holds exactly the labels `ids`. */
function holds(set, ids) {
  if (!set || set.status !== 'adjudicated' || set.labels.length !== ids.length) return false;
  return set.labels.every((l) => ids.includes(l.id));
}

/**
 * Saves the adjudicated set `ids` of a unit (`to`: {sessionId, eventId, who, codebook}),
 * once: a save while one is under way, or of the set already saved, writes nothing (each
 * would add a version to the history). The write is conditional on the reviewer's own set
 * as the page read it (`If-Match`), or on there being none (`If-None-Match: *`).
 */
async function adjudicate(to, ids, state, card) {
  const result = card.querySelector('.result');
  const names = ids.map((id) => labelName(to.codebook, id)).join(', ') || 'no label';
  if (state.saving) return;
  if (holds(state.mine, ids)) {
    status(`Already saved as version ${state.mine.version}: nothing changed, nothing written.`);
    return;
  }
  state.saving = true;
  try {
    const precondition = state.mine ? { ifMatch: `"labels-${state.mine.version}"` } : { ifNoneMatch: '*' };
    const { json } = await api.call(api.setPath(to.sessionId, to.eventId), {
      method: 'PUT',
      body: { annotator: to.who, status: 'adjudicated', labels: ids.map((id) => ({ id })) },
      ...precondition,
    });
    state.mine = json;
    result.classList.remove('error');
    result.textContent = `Adjudicated: ${names} (version ${json.version}).`;
    status('Adjudicated set saved.', 'ok');
  } catch (err) {
    const current = err.status === 412 && err.details.current;
    if (current) state.mine = current;
    result.textContent = current
      ? `Not saved: ${current.annotator}'s set changed meanwhile (now version ${current.version}: ${current.labels.map((l) => labelName(to.codebook, l.id)).join(', ') || 'no label'}). Save again to replace it.`
      : `Not saved (${err.status || 'network'}): ${err.message}`;
    result.classList.add('error');
  } finally {
    state.saving = false;
  }
}

/**
 * The review page's keys: j/k move between cards, a approves the focused card's majority,
 * Enter saves its ticked labels. Before a card has the focus, a and Enter say so.
 */
function reviewKeys(e, list) {
  if (typing(e) && e.target.type !== 'checkbox') return;
  const cards = [...list.querySelectorAll('.review-unit')];
  const at = cards.findIndex((c) => c.contains(document.activeElement));
  const move = (d) => cards[Math.max(0, Math.min(cards.length - 1, at + d))]?.focus();
  const idle = e.target === document.body || e.target === document.getElementById('app');
  if (e.key === 'j') move(1);
  else if (e.key === 'k') move(-1);
  else if (e.key === 'a' && at >= 0) cards[at].querySelector('.approve').click();
  else if (e.key === 'Enter' && at >= 0 && e.target === cards[at]) cards[at].querySelector('.save').click();
  else if ((e.key === 'a' || (e.key === 'Enter' && idle)) && at < 0) {
    status(cards.length ? 'No unit is chosen: press j to go to the first, then a or Enter.' : 'No unit to review here.', 'error');
  } else return;
  e.preventDefault();
}
