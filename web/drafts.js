// Autosaved drafts: the set being edited, kept in localStorage per annotator and unit, so
// a reload or a closed tab loses nothing. Cleared once the set is written to the server.

import { toJson, fromJson } from './labelstate.js';

const key = (who, session, event) => `sg.draft\u0000${who}\u0000${session}\u0000${event}`;

/** Keeps `set` as the draft of `who` on the unit. */
export function saveDraft(who, session, event, set) {
  try {
    localStorage.setItem(key(who, session, event), JSON.stringify({ at: Date.now(), set: toJson(set) }));
  } catch {
    // A full or disabled storage: the server draft (d) still works.
  }
}

/** The kept draft ({at, set}) or null. */
export function loadDraft(who, session, event) {
  try {
    const raw = localStorage.getItem(key(who, session, event));
    if (!raw) return null;
    const json = JSON.parse(raw);
    return { at: json.at, set: fromJson(json.set) };
  } catch {
    return null;
  }
}

/** Forgets the draft. */
export function dropDraft(who, session, event) {
  localStorage.removeItem(key(who, session, event));
}
