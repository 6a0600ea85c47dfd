// DOM building with text only: every string becomes a text node, never markup.

/**
 * Makes an element. `attrs`: `class`, `text`, `on` ({event: handler}), `dataset`,
 * `props` (set as properties), anything else as an attribute. Children: nodes, strings
 * (as text), arrays, null (skipped).
 */
export function h(tag, attrs = {}, ...children) {
  return fill(document.createElement(tag), attrs, children);
}

/** Makes an SVG element, as `h` does. */
export function svg(tag, attrs = {}, ...children) {
  return fill(document.createElementNS('http://www.w3.org/2000/svg', tag), attrs, children);
}

function fill(el, attrs, children) {
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name === 'text') el.textContent = String(value);
    else if (name === 'on') for (const [ev, fn] of Object.entries(value)) el.addEventListener(ev, fn);
    else if (name === 'dataset') Object.assign(el.dataset, value);
    else if (name === 'props') Object.assign(el, value);
    else el.setAttribute(name, value === true ? '' : String(value));
  }
  append(el, children);
  return el;
}

/** Appends children (nodes, strings as text, arrays, nulls skipped). */
export function append(el, children) {
  for (const child of [children].flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

/** Removes every child of `el`, then appends `children`. */
export function replace(el, ...children) {
  el.replaceChildren();
  return append(el, children);
}

/** The page's main element, emptied, with `children` (and the dock's actions gone). */
export function page(...children) {
  const main = document.getElementById('app');
  replace(main, children);
  dock();
  return main;
}

/**
 * Puts `children` (a view's actions) in the dock, the bar fixed at the bottom of the
 * window above the status line, so that they stay in view however the page scrolls; none
 * empties it. The dock's height is kept in the CSS variable `--dock`, which the layout
 * leaves free at the bottom of the page and of the codebook panel.
 */
export function dock(...children) {
  replace(document.getElementById('dock-actions'), children);
}

const dockBar = document.getElementById('dock');
new ResizeObserver(() => {
  document.documentElement.style.setProperty('--dock', `${Math.ceil(dockBar.getBoundingClientRect().height)}px`);
}).observe(dockBar);

/** Shows `message` in the status line (`kind`: info, ok, error). */
export function status(message, kind = 'info') {
  const el = document.getElementById('status');
  el.className = `status ${kind}`;
  el.textContent = message;
}

/** A number as a fixed-point figure, or an en dash for null. */
export function figure(value, digits = 2) {
  return typeof value === 'number' ? value.toFixed(digits) : '–';
}
