// The shortcuts overlay (`?`), and a round's guidelines (`g`).

import { activeRound } from './api.js';
import { h, status } from './dom.js';

/** Every shortcut of the label page, [keys, what]. */
export const SHORTCUTS = [
  ['1 – 9', 'toggle the first nine labels of the codebook'],
  ['f or /', 'filter labels by typing; Enter toggles the first match, Esc leaves'],
  ['e', 'quote the selected text as evidence of the focused label'],
  ['- / +', 'lower / raise the focused label’s confidence by 0.1'],
  ['Ctrl+Enter', 'submit and go to the next unit'],
  ['j / k', 'next / previous unit'],
  ['d', 'save a draft on the server'],
  ['s', 'skip the unit (saved as discarded)'],
  ['n', 'next unit for me from the queue: this session’s (untick “this session only” for every session), in a round the round’s'],
  ['g', 'show or hide the round’s guidelines (in a round)'],
  ['?', 'show or hide this help'],
  ['Esc', 'close this help, leave a text field'],
];

/** Shows the overlay, or hides it when shown. */
export function toggleHelp() {
  toggleOverlay('help', 'Keyboard shortcuts',
    h('table', {}, h('tbody', {}, SHORTCUTS.map(([k, what]) => h('tr', {}, h('th', {}, h('kbd', { text: k })), h('td', { text: what }))))));
}

/** Shows the active round's guidelines (Markdown, shown as text), or hides them. */
export function toggleGuidelines() {
  const round = activeRound();
  if (!round) {
    status('Guidelines belong to a round: open one from the Rounds page.', 'error');
    return;
  }
  toggleOverlay('guidelines', `Guidelines of ${round.name}`,
    h('div', { class: 'guidelines', text: round.guidelines || 'This round has no guidelines.' }),
    h('p', { class: 'hint', text: `Codebook: ${round.codebook}. Press g or Esc to close.` }));
}

/** Shows a dialog `id` titled `title` holding `body`, or removes it when shown. */
function toggleOverlay(id, title, ...body) {
  const open = document.getElementById(id);
  if (open) {
    open.remove();
    return;
  }
  const close = h('button', { type: 'button', text: 'Close', on: { click: () => overlay.remove() } });
  const overlay = h('div', { id, class: 'overlay', role: 'dialog', 'aria-modal': 'true', 'aria-label': title },
    h('div', { class: 'panel' }, h('h2', { text: title }), body, close));
  overlay.addEventListener('keydown', (e) => {
    if (e.key === 'Escape') overlay.remove();
  });
  document.body.append(overlay);
  close.focus();
}
