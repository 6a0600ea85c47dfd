// The page's entry: who is labeling (key, name), then the view the URL names.

import * as api from './api.js';
import { agreementPage } from './agreement.js';
import { annotator, apiKey, setAnnotator, setApiKey, validName } from './auth.js';
import { h, page, status } from './dom.js';
import { labelPage } from './label.js';
import { onKeys } from './nav.js';
import { reviewPage } from './review.js';
import { sessionsPage } from './sessions.js';

const decode = (s) => (s === undefined ? undefined : decodeURIComponent(s));

const ROUTES = [
  [/^\/(?:sessions)?\/?$/, () => sessionsPage()],
  [/^\/label(?:\/([^/]+))?(?:\/([^/]+))?\/?$/, (m) => labelPage(decode(m[1]), decode(m[2]))],
  [/^\/review\/([^/]+)\/?$/, (m) => reviewPage(decode(m[1]))],
  [/^\/agreement\/?$/, () => agreementPage()],
];

/** Draws the view of the current URL, after making sure of the key and the annotator. */
async function route() {
  onKeys(null);
  if (!(await identified())) return;
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

/** True when the API answers with the tab's key (if any) and an annotator is known. */
async function identified() {
  try {
    await api.codebook();
  } catch (err) {
    if (err instanceof api.ApiError && err.status === 401) {
      askKey(apiKey() ? 'That API key was refused (401): check it and try again.' : null);
      return false;
    }
    throw err;
  }
  if (!annotator()) {
    askName();
    return false;
  }
  document.getElementById('whoami').textContent = `Labeling as ${annotator()}`;
  return true;
}

function askKey(problem) {
  const input = h('input', { type: 'password', id: 'api-key', autocomplete: 'off', 'aria-label': 'API key' });
  const name = h('input', { type: 'text', id: 'key-name', value: annotator() || '', 'aria-label': 'Your annotator name (the key’s name)' });
  const go = () => {
    setApiKey(input.value.trim());
    if (validName(name.value.trim())) setAnnotator(name.value.trim());
    route();
  };
  page(h('div', { class: 'ask', role: 'group', 'aria-label': 'Sign in' },
    h('h1', { text: 'This server wants an API key' }),
    problem ? h('p', { class: 'error', role: 'alert', text: problem }) : null,
    h('label', {}, 'API key ', input),
    h('label', {}, 'Your name (the key’s annotator name) ', name),
    h('button', { type: 'button', text: 'Continue', on: { click: go } })));
  for (const el of [input, name]) el.addEventListener('keydown', (e) => { if (e.key === 'Enter') go(); });
  input.focus();
}

function askName() {
  const input = h('input', { type: 'text', id: 'annotator-name', 'aria-label': 'Annotator name' });
  const problem = h('p', { class: 'error', role: 'alert' });
  const go = () => {
    const name = input.value.trim();
    if (!validName(name)) {
      problem.textContent = 'A name is 1 to 100 letters, digits, ., _, - or @.';
      return;
    }
    setAnnotator(name);
    route();
  };
  input.addEventListener('keydown', (e) => { if (e.key === 'Enter') go(); });
  page(h('div', { class: 'ask', role: 'group', 'aria-label': 'Who are you' },
    h('h1', { text: 'Who is labeling?' }),
    h('label', {}, 'Your annotator name ', input), problem,
    h('button', { type: 'button', text: 'Continue', on: { click: go } })));
  input.focus();
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
route();
