// The shortcuts overlay (`?`).

import { h } from './dom.js';

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
  ['n', 'next unit for me from the queue'],
  ['?', 'show or hide this help'],
  ['Esc', 'close this help, leave a text field'],
];

/** Shows the overlay, or hides it when shown. */
export function toggleHelp() {
  const open = document.getElementById('help');
  if (open) {
    open.remove();
    return;
  }
  const close = h('button', { type: 'button', text: 'Close', on: { click: () => overlay.remove() } });
  const overlay = h('div', { id: 'help', class: 'overlay', role: 'dialog', 'aria-modal': 'true', 'aria-label': 'Keyboard shortcuts' },
    h('div', { class: 'panel' },
      h('h2', { text: 'Keyboard shortcuts' }),
      h('table', {}, h('tbody', {}, SHORTCUTS.map(([k, what]) => h('tr', {}, h('th', {}, h('kbd', { text: k })), h('td', { text: what }))))),
      close));
  overlay.addEventListener('keydown', (e) => {
    if (e.key === 'Escape') overlay.remove();
  });
  document.body.append(overlay);
  close.focus();
}
