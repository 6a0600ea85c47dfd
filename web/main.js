// The page's entry: who is labeling (key, name), then the view the URL names.

import * as api from './api.js';
import { agreementPage } from './agreement.js';
import { annotator, apiKey, keyRequired, linkedAnnotator, setAnnotator, setApiKey, setProfile, validName } from './auth.js';
import { h, page, status } from './dom.js';
import { labelPage, loadSets } from './label.js';
import { onKeys } from './nav.js';
import { reviewPage, roundReviewPage } from './review.js';
import { roundAgreementPage, roundLabel, roundsPage } from './rounds.js';
import { sessionsPage } from './sessions.js';

let ready = false;

const decode = (s) => (s === undefined ? undefined : decodeURIComponent(s));

const ROUTES = [
  [/^\/(?:sessions)?\/?$/, () => sessionsPage()],
  [/^\/label(?:\/([^/]+))?(?:\/([^/]+))?\/?$/, (m) => labelPage(decode(m[1]), decode(m[2]))],
  [/^\/review\/([^/]+)\/?$/, (m) => reviewPage(decode(m[1]))],
  [/^\/agreement\/?$/, () => agreementPage()],
  [/^\/rounds\/?$/, () => roundsPage()],
  [/^\/rounds\/([^/]+)\/label\/?$/, (m) => roundLabel(decode(m[1]))],
  [/^\/rounds\/([^/]+)\/agreement\/?$/, (m) => roundAgreementPage(decode(m[1]))],
  [/^\/rounds\/([^/]+)\/review\/?$/, (m) => roundReviewPage(decode(m[1]))],
];

/** Draws the view of the current URL, after making sure of the key and the annotator. */
async function route() {
  performance.mark('sg-route');
  onKeys(null);
  if (!ready) {
    ready = await identified().catch((err) => {
      shown(err);
      return false;
    });
    if (!ready) return;
  }
  const path = location.pathname;
  for (const [pattern, view] of ROUTES) {
    const m = pattern.exec(path);
    if (m) {
      if (pattern === ROUTES[1][0] && !m[1]) return sessionsPage().catch(shown);
      return view(m).catch(shown);
    }
  }
  page(h('p', { class: 'error', role: 'alert', text: `No page at ${path}.` }));
}

/** An error of a view, in place of the view. */
function shown(err) {
  const message = err instanceof api.ApiError ? `The server answered ${err.status}: ${err.message}` : String(err);
  page(h('p', { class: 'error', role: 'alert', text: message }));
  status(message, 'error');
}

/**
 * True when the API answers with the tab's key (if any) and an annotator is known. A
 * server that wants a key is asked nothing before the tab has one.
 */
async function identified() {
  if (keyRequired() && !apiKey()) {
    askKey(null);
    return false;
  }
  const asked = annotator();
  const linked = linkedAnnotator();
  let me;
  try {
    [, me] = await Promise.all([
      api.codebook(),
      api.get(`/api/me${asked ? `?annotator=${encodeURIComponent(asked)}` : ''}`),
    ]);
  } catch (err) {
    if (err instanceof api.ApiError && err.status === 401) {
      askKey(apiKey() ? 'That API key was refused (401 Unauthorized): check it and try again.' : null);
      return false;
    }
    throw err;
  }
  setProfile(me);
  if (me.annotator) setAnnotator(me.annotator);
  else if (linked && linked !== asked) {
    askName(linked, asked);
    return false;
  } else if (!asked) {
    askName();
    return false;
  }
  const role = me.reviewer ? ' (reviewer)' : '';
  const mode = me.read_only ? ' · read-only server' : '';
  document.getElementById('whoami').textContent = `Labeling as ${annotator()}${role}${mode}`;
  return true;
}

function askKey(problem) {
  const input = h('input', { type: 'password', id: 'api-key', autocomplete: 'off', 'aria-label': 'API key' });
  const go = () => {
    setApiKey(input.value.trim());
    route();
  };
  input.addEventListener('keydown', (e) => { if (e.key === 'Enter') go(); });
  page(h('div', { class: 'ask', role: 'group', 'aria-label': 'Sign in' },
    h('h1', { text: 'This server wants an API key' }),
    h('p', { text: 'The key is kept for this tab only. A named key (NAME:KEY) labels as NAME.' }),
    problem ? h('p', { id: 'key-problem', class: 'error', role: 'alert', text: problem }) : null,
    h('label', {}, 'API key ', input),
    h('button', { type: 'button', text: 'Continue', on: { click: go } })));
  input.focus();
}

/**
 * Asks who labels in this browser (the name is kept for the origin: every tab).
 * `linked`: the name a link gives (offered, not taken); `current`: the name kept, which
 * the annotator may keep instead.
 */
function askName(linked = null, current = null) {
  const input = h('input', { type: 'text', id: 'annotator-name', 'aria-label': 'Annotator name', value: linked || '' });
  const problem = h('p', { class: 'error', role: 'alert' });
  const go = () => {
    const name = input.value.trim();
    if (!validName(name)) {
      problem.textContent = 'A name is 1 to 100 letters, digits, ., _, - or @.';
      return;
    }
    setAnnotator(name);
    forgetLinkedName();
    route();
  };
  input.addEventListener('keydown', (e) => { if (e.key === 'Enter') go(); });
  const keep = () => {
    forgetLinkedName();
    route();
  };
  const offer = linked
    ? `This link opens the page as ${linked}${current ? `; this browser labels as ${current}` : ''}. Continue as the name below?`
    : null;
  page(h('div', { class: 'ask', role: 'group', 'aria-label': 'Who are you' },
    h('h1', { text: 'Who is labeling?' }),
    offer ? h('p', { id: 'linked-name', text: offer }) : null,
    h('label', {}, 'Your annotator name ', input), problem,
    h('button', { type: 'button', text: 'Continue', on: { click: go } }),
    current ? h('button', { type: 'button', id: 'keep-name', text: `Keep ${current}`, on: { click: keep } }) : null));
  input.focus();
}

/** Takes `?annotator=` out of the address once the annotator's name is settled. */
function forgetLinkedName() {
  const url = new URL(location.href);
  if (!url.searchParams.has('annotator')) return;
  url.searchParams.delete('annotator');
  history.replaceState(null, '', url.pathname + url.search + url.hash);
}

/** A deep link to a unit: its session's units and sets are fetched while the rest loads. */
function prefetch() {
  const m = /^\/label\/([^/]+)/.exec(location.pathname);
  if (!m || (keyRequired() && !apiKey())) return;
  api.units(decode(m[1])).catch(() => {});
  if (annotator()) loadSets(decode(m[1]), annotator()).catch(() => {});
}

window.addEventListener('popstate', route);
window.addEventListener('sg:navigate', route);
document.addEventListener('click', (e) => {
  const a = e.target instanceof Element ? e.target.closest('a[href^="/"]') : null;
  if (!a || e.ctrlKey || e.metaKey || e.shiftKey || e.button !== 0) return;
  e.preventDefault();
  history.pushState(null, '', a.getAttribute('href'));
  route();
});
prefetch();
route();
