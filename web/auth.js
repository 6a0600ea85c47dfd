// Who labels: the API key (kept for the tab in sessionStorage) and the annotator's name.

const KEY = 'sg.key';
const NAME = 'sg.annotator';

/** The API key of this tab, or null. */
export function apiKey() {
  return sessionStorage.getItem(KEY);
}

/** Keeps `key` for the tab (null forgets it). */
export function setApiKey(key) {
  if (key) sessionStorage.setItem(KEY, key);
  else sessionStorage.removeItem(KEY);
}

/** The tab's annotator, or null. */
export function annotator() {
  return sessionStorage.getItem(NAME);
}

/**
 * The annotator a link names (`?annotator=NAME`), or null. A link never signs the tab in
 * by itself: the page asks first (a link made by someone else would label as them).
 */
export function linkedAnnotator() {
  const named = new URLSearchParams(location.search).get('annotator');
  return named && validName(named) ? named : null;
}

/** Keeps `name` as the tab's annotator. */
export function setAnnotator(name) {
  sessionStorage.setItem(NAME, name);
}

/** True when `name` is a valid annotator name (as the API checks it). */
export function validName(name) {
  return /^[A-Za-z0-9._@-]{1,100}$/.test(name);
}

let profile = { annotator: null, reviewer: false, read_only: false, blind: false };

/** Keeps what `/api/me` said of the asker. */
export function setProfile(me) {
  profile = me;
}

/** What `/api/me` said: {annotator, reviewer, read_only, blind, queue_overlap}. */
export function profileOf() {
  return profile;
}
