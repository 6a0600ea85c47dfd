// The labels API, and nothing else: fetch with the tab's key, JSON in and out.

import { apiKey } from './auth.js';

/** An API answer that was not a success: status, the error body's message and details. */
export class ApiError extends Error {
  constructor(status, body) {
    super(body && body.message ? body.message : `HTTP ${status}`);
    this.status = status;
    this.body = body || {};
    this.details = this.body.details || {};
  }
}

/**
 * Calls the API. Returns {status, etag, json}; throws ApiError for 4xx/5xx.
 * `ifMatch`, `ifNoneMatch`: the If-Match or If-None-Match header of a conditional write.
 */
export async function call(path, { method = 'GET', body, ifMatch, ifNoneMatch } = {}) {
  const headers = { Accept: 'application/json' };
  const key = apiKey();
  if (key) headers.Authorization = `Bearer ${key}`;
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  if (ifMatch) headers['If-Match'] = ifMatch;
  if (ifNoneMatch) headers['If-None-Match'] = ifNoneMatch;
  const response = await fetch(path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return read(response);
}

/** A fetch response as {status, etag, json}; throws ApiError for 4xx/5xx. */
async function read(response) {
  const text = await response.text();
  let json = null;
  try {
    json = text ? JSON.parse(text) : null;
  } catch {
    json = null;
  }
  if (!response.ok) throw new ApiError(response.status, json);
  return { status: response.status, etag: response.headers.get('ETag'), json };
}

/** GET `path`, the body. */
export async function get(path) {
  return (await call(path)).json;
}

const cache = new Map();

/** GET `path` once per page load (the codebook, a session's units). */
export function cached(path) {
  if (!cache.has(path)) {
    const early = globalThis.sgEarly && globalThis.sgEarly[path];
    if (early) delete globalThis.sgEarly[path];
    const promise = early ? early.then(read).then((r) => r.json) : get(path);
    promise.catch(() => cache.delete(path));
    cache.set(path, promise);
  }
  return cache.get(path);
}

/** `/api/graph/{id}/…` with the id escaped. */
export function graph(id, rest = '') {
  return `/api/graph/${encodeURIComponent(id)}${rest}`;
}

/**
 * The round this tab labels in (`{id, name, codebook, guidelines}`, kept for the tab), or
 * null: the label page then uses the round's codebook and takes units from its queue.
 */
export function activeRound() {
  try {
    return JSON.parse(sessionStorage.getItem('sg.round'));
  } catch {
    return null;
  }
}

/** Enters `round` (a round as `GET /api/rounds/{id}` gives it), or leaves it (null). */
export function setActiveRound(round) {
  if (!round) {
    sessionStorage.removeItem('sg.round');
    return;
  }
  const { id, name, codebook: book, guidelines } = round;
  sessionStorage.setItem('sg.round', JSON.stringify({ id, name, codebook: book, guidelines }));
}

/** `?codebook=` (or `&codebook=` after `sep`) of the active round; empty outside one. */
export function codebookQuery(sep = '?') {
  const round = activeRound();
  return round ? `${sep}codebook=${encodeURIComponent(round.codebook)}` : '';
}

/** The codebook the tab labels under: the active round's, else the server's default. */
export function codebook() {
  return cached(`/api/codebook${codebookQuery()}`);
}

/** The path of a session's sets under the tab's codebook, `annotator`'s only if given. */
export function labelsPath(sessionId, annotator = null) {
  const who = annotator ? `?annotator=${encodeURIComponent(annotator)}` : '';
  return graph(sessionId, `/labels${who}${codebookQuery(who ? '&' : '?')}`);
}

/** A session's units, sub-agents included. */
export async function units(sessionId) {
  const body = await cached(graph(sessionId, '/annotations?include_sidechains=true'));
  return body.annotations;
}

/**
 * The units of a session the codebook codes (its `unit_types`: a codebook of user and
 * assistant turns leaves system notices out of the queue, the counts and the review).
 */
export async function codedUnits(sessionId) {
  const [book, all] = await Promise.all([codebook(), units(sessionId)]);
  const types = book.unit_types;
  return types ? all.filter((u) => types.includes(u.unit_type)) : all;
}

/** The path of a unit's set, under the tab's codebook. */
export function setPath(sessionId, eventId) {
  return graph(sessionId, `/labels/${encodeURIComponent(eventId)}${codebookQuery()}`);
}
