// Who labels: the API key (kept for the tab in sessionStorage) and the annotator's name
// (kept for the origin in localStorage: every tab of the page labels as the same person).

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

/**
 * True when the server wants an API key (the shell says so in its `sg-api-key` meta tag),
 * so that the page asks for one before any API call rather than after a 401.
 */
export function keyRequired() {
  const meta = document.querySelector('meta[name="sg-api-key"]');
  return !!meta && meta.content === 'required';
}

/** The annotator of this browser (for this origin, every tab), or null. */
export function annotator() {
  try {
    return localStorage.getItem(NAME);
  } catch {
    return null;
  }
}

/**
 * The annotator a link names (`?annotator=NAME`), or null. A link never signs the tab in
 * by itself: the page asks first (a link made by someone else would label as them).
 */
export function linkedAnnotator() {
  const named = new URLSearchParams(location.search).get('annotator');
  return named && validName(named) ? named : null;
}

/** Keeps `name` as the annotator of this browser (every tab of the origin). */
export function setAnnotator(name) {
  try {
    localStorage.setItem(NAME, name);
  } catch {
    // A disabled storage: the page asks again on the next load.
  }
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
