// Moving between the page's views without reloading, and the one keyboard handler.

let keyHandler = null;

/** Shows `path` (a page URL): pushes it to the history and asks main.js to draw it. */
export function navigate(path, { replace = false } = {}) {
  if (replace) history.replaceState(null, '', path);
  else history.pushState(null, '', path);
  window.dispatchEvent(new Event('sg:navigate'));
}

/** Makes `handler(event)` the page's keydown handler (null: none). */
export function onKeys(handler) {
  keyHandler = handler;
}

document.addEventListener('keydown', (event) => {
  if (keyHandler) keyHandler(event);
});

/** True when the key event happens in a text field (letters are then typing). */
export function typing(event) {
  const t = event.target;
  if (!(t instanceof HTMLElement)) return false;
  if (t.isContentEditable || t.tagName === 'TEXTAREA' || t.tagName === 'SELECT') return true;
  return t.tagName === 'INPUT' && !['range', 'checkbox', 'radio', 'button'].includes(t.type);
}

/** The page URL of a unit. */
export function unitUrl(sessionId, eventId) {
  return `/label/${encodeURIComponent(sessionId)}/${encodeURIComponent(eventId)}`;
}
